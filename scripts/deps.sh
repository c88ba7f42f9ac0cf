# Sourced by scripts/run.sh and scripts/test.sh: makes sure the Debian packages holdback needs are
# installed. As root it installs what is missing; otherwise it prints the exact command and stops.
HOLDBACK_PACKAGES="cmake make g++ nlohmann-json3-dev libgtest-dev libgmock-dev libbenchmark-dev libyaml-dev pkg-config libboost1.81-dev libhiredis-dev redis-server python3 prometheus hey"

holdback_ensure_packages() {
  local missing="" pkg
  for pkg in $HOLDBACK_PACKAGES "$@"; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
      missing="$missing $pkg"
    fi
  done
  [ -z "$missing" ] && return 0
  if [ "$(id -u)" = 0 ]; then
    echo "Installing missing packages:$missing" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >&2
  else
    echo "Missing packages:$missing" >&2
    echo "Run: sudo apt-get install -y$missing" >&2
    exit 1
  fi
}
