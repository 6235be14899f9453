# gpuguard benchmark (issue 27): allocate+free pairs from the bottom of a
# Python stack DEPTH frames deep (argv: LIBPYBENCH DEPTH PAIRS), through
# ctypes.CDLL. Warm pairs first (the code-object and line caches fill), then
# the counted ones (timed_pairs). Prints "pybench DEPTH PAIRS".
import ctypes
import sys

lib = ctypes.CDLL(sys.argv[1])
depth, pairs = int(sys.argv[2]), int(sys.argv[3])
if lib.pybench_setup() != 0:
    sys.exit("pybench: no simulated GPU")


def down(n):
    if n > 1:
        return down(n - 1)
    if lib.warm_pairs(ctypes.c_long(1000)) or lib.timed_pairs(ctypes.c_long(pairs)):
        sys.exit("pybench: a pair failed")
    return 0


# down() is depth - 1 frames under the module's own.
down(depth - 1)
print("pybench", depth, pairs)
