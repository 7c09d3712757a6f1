# Shell functions the CI scripts share (sourced by .ci/deps and .ci/targets; bash).

# apt_install PACKAGE...: installs the Debian packages of the list that are not installed yet (as
# root, quietly, without recommends), so it costs nothing on a machine that has them all.
apt_install() {
  local missing=()
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "installing: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
}
