# Sourced by the fixture scripts that run a library's own code (HeavyBall,
# DeepSpeed, torchtitan, Lightning, accelerate): the paths they share, the
# torch 2.6 chroot made ready, and the two steps each of them takes, a tag of a
# fetched repository extracted into the chroot (outside this repository: the
# libraries' code is never committed here) and Debian packages installed there.
here=$(cd "$(dirname "${BASH_SOURCE[1]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
root=${OPTSTATE_TORCH26_ROOT:-/var/cache/optstate-torch26}
"$here/torch26-chroot.sh"

# extract_source GIT_DIR REV NAME PATH... : `git archive REV PATH...` of GIT_DIR
# (a bare clone, or a `fetch` mirror whose repo/ holds it) into the chroot's
# /var/tmp/NAME, replacing what an earlier run left there; prints that path.
extract_source() {
  local git_dir=$1 rev=$2 inside=/var/tmp/$3
  shift 3
  [ -d "$git_dir/repo" ] && git_dir=$git_dir/repo
  rm -rf --one-file-system "$root$inside"
  mkdir -p "$root$inside"
  git --git-dir="$git_dir" archive "$rev" "$@" | tar -x -C "$root$inside"
  echo "$inside"
}

# install_in_chroot PACKAGE...: what the library imports, from Debian trixie
# (the chroot is built without package lists, so they are fetched first).
install_in_chroot() {
  unshare --mount --propagation private bash -c '
    r=$1; shift; mount -t proc proc "$r/proc"; mount --rbind /dev "$r/dev"
    chroot "$r" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin apt-get update -qq >&2
    chroot "$r" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive \
      apt-get install -y -qq "$@" >&2' _ "$root" "$@"
}
