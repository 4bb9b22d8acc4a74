# shellcheck shell=bash
# Sourced by scripts/setup.sh and scripts/setup-peers.sh. install_missing_packages PREFIX PACKAGE...
# installs, with apt, those of the Debian packages that are not installed yet. Idempotent: packages
# already present are not reinstalled and `apt-get update` runs only when something is missing.
# Messages start with PREFIX. Uses sudo when not root.
install_missing_packages() {
  local prefix="$1" pkg
  shift
  local missing=()
  for pkg in "$@"; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
      missing+=("$pkg")
    fi
  done
  if [ ${#missing[@]} -eq 0 ]; then
    echo "$prefix: all $# packages present"
    return 0
  fi
  local sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  echo "$prefix: installing ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
  echo "$prefix: done"
}
