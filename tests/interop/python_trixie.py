"""Inside the trixie build chroot (check_python_trixie.sh): installs the Python
package as README.md says, with trixie's own Python 3.13, g++ 14, pybind11 and
CLI11 2.4, then runs the whole pytest suite against it, torch 2.6 included.

Usage (in the chroot, from the repository): python3 python_trixie.py SCRATCH BINARY
"""
import os
import subprocess
import sys
import time

scratch, binary = sys.argv[1], sys.argv[2]
site = os.path.join(scratch, "site")
start = time.monotonic()
build = dict(os.environ, OPTSTATE_BUILD_DIR=os.path.join(scratch, "cmake"), CMAKE_BUILD_PARALLEL_LEVEL="2")
subprocess.check_call([sys.executable, "-m", "pip", "install", "-q", "--no-build-isolation", "--no-deps",
                       "--no-cache-dir", "--break-system-packages", "--root-user-action=ignore", "--target", site, "./python"], env=build)
print(f"python_trixie: installed with Python {sys.version.split()[0]} in {time.monotonic() - start:.0f} s",
      flush=True)
test = dict(os.environ, PYTHONPATH=site, OPTSTATE_BINARY=binary)
sys.exit(subprocess.call([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "python/tests"], env=test))
