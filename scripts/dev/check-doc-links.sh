#!/usr/bin/env bash
# Checks that the documentation's links resolve (ctest's Docs.Links):
#  - every relative Markdown link [text](path) or [text](path#anchor) in README.md, CHANGELOG.md
#    and docs/**/*.md names a file or directory that exists, and its #anchor (if any) a heading
#    of that page (GitHub's rule: lower case, punctuation but - and _ dropped, spaces to -);
#  - every repository path docs/<page>.md named anywhere in the tracked sources exists.
# Prints every broken link, then exits 1 if there was one.
#   scripts/dev/check-doc-links.sh [SOURCE_DIR]
set -euo pipefail
root=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
cd "$root"
broken=0

# The anchors of one page, one per line (fenced code blocks skipped; duplicates get -1, -2, ...).
anchors() {
  awk '
    /^```/ { fenced = !fenced; next }
    fenced { next }
    /^#+ / {
      h = $0; sub(/^#+ +/, "", h); h = tolower(h)
      gsub(/[^a-z0-9 _-]/, "", h); gsub(/ /, "-", h)
      if (h in seen) { n = seen[h]++; print h "-" n } else { seen[h] = 1; print h }
    }' "$1"
}

pages=$(ls README.md CHANGELOG.md; find docs -name '*.md' | sort)
for page in $pages; do
  dir=$(dirname "$page")
  # Links outside fenced code blocks and outside inline code: [text](target).
  links=$(awk '/^```/ { fenced = !fenced; next } !fenced { gsub(/`[^`]*`/, ""); print }' "$page" |
          grep -oE '\]\([^) ]+\)' | sed -E 's/^\]\((.*)\)$/\1/' || true)
  for link in $links; do
    case $link in
      http://* | https://* | mailto:*) continue ;;
    esac
    path=${link%%#*}
    anchor=
    [[ $link == *#* ]] && anchor=${link#*#}
    if [[ -z $path ]]; then
      target=$page
    else
      target=$dir/$path
    fi
    if [[ ! -e $target ]]; then
      echo "$page: link to $link: no file $target"
      broken=1
      continue
    fi
    if [[ -n $anchor && -f $target && $target == *.md ]]; then
      if ! anchors "$target" | grep -qxF -- "$anchor"; then
        echo "$page: link to $link: no heading #$anchor in $target"
        broken=1
      fi
    fi
  done
done

# Repository paths of pages named in the sources (comments, help texts, scripts, CMake).
while IFS=: read -r file path; do
  if [[ ! -e $path ]]; then
    echo "$file: names $path, which does not exist"
    broken=1
  fi
done < <(git ls-files -z 2>/dev/null | xargs -0 grep -oE 'docs/[A-Za-z0-9_./-]+\.md' 2>/dev/null |
         grep -v '^CHANGELOG.md:' | sort -u || true)

if [[ $broken -ne 0 ]]; then
  echo "FAIL: broken documentation links (above)"
  exit 1
fi
echo "documentation links: ok"
