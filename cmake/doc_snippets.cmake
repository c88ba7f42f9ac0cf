# Every C++ block of README.md and docs/**/*.md compiles (target holdback_doc_snippets, built with
# the tests): a doc that drifts from the API fails the build.
#
# The convention (docs/design/architecture.md, "Docs are compiled"):
#   - each fenced ```cpp block is one translation unit, compiled against holdback::holdback;
#   - an HTML comment right before a block (blank lines between are allowed), invisible on the
#     rendered page, states what the page assumes around it:
#         <!-- snippet
#         #include "holdback/policy/policies.hpp"
#         void example(double saturation) {
#         @snippet@
#         }
#         -->
#     The block replaces the line @snippet@ (appended after the comment's code when there is
#     none); its leading #include lines go first, to the top of the unit. HTML comments cannot
#     contain two dashes in a row: write `x -= 1`, not `x--`;
#   - a page whose text contains <!-- snippets: one-program --> is one program instead: its
#     blocks, in order, form one translation unit (docs/guide/getting-started.md; tests/consumers/
#     also links and runs it);
#   - `#line` directives point compiler errors at the page and line of the block.
#
# holdback_extract_doc_snippets(<page> <out_dir> <sources_var> <programs_var>): writes the page's
# translation units into <out_dir> (only when their content changed) and appends their paths to
# <sources_var>, or, for a one-program page, to <programs_var>.

function(holdback_extract_doc_snippets page out_dir sources_var programs_var)
  file(READ ${page} text)
  file(RELATIVE_PATH rel ${PROJECT_SOURCE_DIR} ${page})
  string(REGEX REPLACE "[/.]" "_" stem "${rel}")
  # A closing fence with text after it swallows the rest of the page into a code block.
  if(text MATCHES "\n```[ \t]+[^ \t\n][^\n]*")
    message(FATAL_ERROR "${rel}: text after a code fence: ${CMAKE_MATCH_0}")
  endif()
  set(one_program FALSE)
  string(FIND "${text}" "<!-- snippets: one-program -->" marker)
  if(NOT marker EQUAL -1)
    set(one_program TRUE)
  endif()
  set(sources ${${sources_var}})
  set(programs ${${programs_var}})
  set(program "")
  set(line 1)  # the page's line at the start of `text`
  set(index 0)
  while(TRUE)
    string(FIND "${text}" "```cpp\n" start)
    if(start EQUAL -1)
      break()
    endif()
    string(SUBSTRING "${text}" 0 ${start} before)
    math(EXPR body_start "${start} + 7")
    string(SUBSTRING "${text}" ${body_start} -1 rest)
    string(FIND "${rest}" "\n```" end)
    if(end EQUAL -1)
      message(FATAL_ERROR "${rel}: a ```cpp block is not closed")
    endif()
    string(SUBSTRING "${rest}" 0 ${end} code)
    math(EXPR after "${end} + 4")
    string(SUBSTRING "${rest}" ${after} -1 text)

    # Lines: the block's first code line, and the start of the remaining text.
    string(REGEX MATCHALL "\n" nl_before "${before}")
    list(LENGTH nl_before n_before)
    string(REGEX MATCHALL "\n" nl_code "${code}")
    list(LENGTH nl_code n_code)
    math(EXPR code_line "${line} + ${n_before} + 1")
    math(EXPR line "${code_line} + ${n_code} + 1")

    # The prelude: the last "<!-- snippet" comment of `before`, if only blank space follows it.
    set(prelude "")
    string(FIND "${before}" "<!-- snippet\n" open REVERSE)
    if(NOT open EQUAL -1)
      math(EXPR open_end "${open} + 13")
      string(SUBSTRING "${before}" ${open_end} -1 comment)
      string(FIND "${comment}" "-->" close)
      if(NOT close EQUAL -1)
        string(SUBSTRING "${comment}" 0 ${close} candidate)
        math(EXPR tail_start "${close} + 3")
        string(SUBSTRING "${comment}" ${tail_start} -1 tail)
        if(tail MATCHES "^[ \n]*$")
          set(prelude "${candidate}")
        endif()
      endif()
    endif()

    # The block's leading #include lines go to the top of the unit, before the prelude.
    set(includes "")
    set(body "${code}")
    set(body_line ${code_line})
    if(code MATCHES "^((#include[^\n]*\n|[ ]*\n)+)")
      set(includes "#line ${code_line} \"${rel}\"\n${CMAKE_MATCH_1}")
      string(LENGTH "${CMAKE_MATCH_1}" n)
      string(SUBSTRING "${code}" ${n} -1 body)
      string(REGEX MATCHALL "\n" nl_includes "${CMAKE_MATCH_1}")
      list(LENGTH nl_includes n_includes)
      math(EXPR body_line "${code_line} + ${n_includes}")
    endif()
    set(located "#line ${body_line} \"${rel}\"\n${body}\n")
    if(NOT prelude STREQUAL "")
      set(prelude "#line 1 \"${rel}: the snippet comment before line ${code_line}\"\n${prelude}")
    endif()
    string(FIND "${prelude}" "@snippet@" hole)
    if(hole EQUAL -1)
      set(unit "${includes}${prelude}${located}")
    else()
      string(REPLACE "@snippet@" "${located}" unit "${prelude}")
      set(unit "${includes}${unit}")
    endif()
    if(one_program)
      string(APPEND program "${unit}")
    else()
      set(source ${out_dir}/${stem}_${index}.cpp)
      file(CONFIGURE OUTPUT ${source} CONTENT "// Generated from ${rel}.\n${unit}" @ONLY)
      list(APPEND sources ${source})
    endif()
    math(EXPR index "${index} + 1")
  endwhile()
  if(one_program AND index GREATER 0)
    set(source ${out_dir}/${stem}.cpp)
    file(CONFIGURE OUTPUT ${source} CONTENT "// Generated from ${rel}.\n${program}" @ONLY)
    list(APPEND programs ${source})
  endif()
  set(${sources_var} ${sources} PARENT_SCOPE)
  set(${programs_var} ${programs} PARENT_SCOPE)
endfunction()
