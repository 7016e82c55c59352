# Sourced: debian_mirror prints the Debian mirror URL to build chroots from:
# OPTSTATE_DEBIAN_MIRROR, else the first Debian URI in the host's apt sources;
# nothing (and status 1) when there is none.
debian_mirror() {
  local mirror=${OPTSTATE_DEBIAN_MIRROR:-}
  if [ -z "$mirror" ]; then
    mirror=$( { sed -n 's/^URIs:[[:space:]]*//p' /etc/apt/sources.list.d/*.sources 2>/dev/null | tr ' ' '\n'
                awk '$1 == "deb" { print $2 }' /etc/apt/sources.list 2>/dev/null; } |
              grep -E '/debian/?$' | head -n 1 || true)
  fi
  [ -n "$mirror" ] && echo "$mirror"
}
