# Sourced by the interop checks as `. check_setup.sh OPTSTATE_BINARY NAME`:
# sets `bin` (the binary, made absolute) and `scratch` (testdata/.NAME-check,
# inside the tree where the torch 2.6 chroot sees it, made empty and removed
# however the check ends), and runs from the repository's top.
bin=$(readlink -f "$1")
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
repo=$(pwd)
scratch=testdata/.$2-check
trap 'rm -rf "$scratch"' EXIT
rm -rf "$scratch" && mkdir -p "$scratch"
