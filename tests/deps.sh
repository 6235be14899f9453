#!/bin/sh
# gpuguard: installs the Debian packages the build and tests need, only those
# missing, so `make demo` and `make check` work on a fresh machine. Run as
# root (as CI is); otherwise it says what to install and carries on.
#   build-essential  gcc, make, binutils (nm, readelf for the exports test)
#   clang-format     the format check of `make check-all` (make format-check)
#   libamdhip64-dev  HIP headers the ABI conformance test checks against
#   libunwind8       the unwinder dumps dlopen (runtime only: no headers, no
#                    link; without it stacks fall back to frame pointers)
#   uthash-dev       header-only hash tables the gpuguard command (tools/) uses
#   jq               the baseline `make bench` times `gpuguard report` against
#   prometheus       for promtool: `gpuguard metrics` must pass `promtool check metrics`
#   gcc-aarch64-linux-gnu, libc6-dev-arm64-cross, qemu-user-static
#                    the aarch64 run of `make check-all` (tests/aarch64.sh)
#   spin             checks the pod reservation protocol model (tests/model/pod.pml)
#   nodejs, npm      validate deploy/ against the real Kubernetes, Prometheus
#                    Operator and Kyverno schemas (tests/scripts/deploy.sh; its
#                    npm packages go into build/deploy-node). A node and npm
#                    already on PATH (NodeSource's nodejs bundles npm, and
#                    conflicts with Debian's npm package) count as installed.
#   python3-yaml     reads deploy/node/exporter.yaml for the identity the
#                    node exporter test takes (tests/scripts/node_exporter.sh)
#   debootstrap      the Debian 11 root filesystem of the container run
#                    (tests/scripts/container.sh; built once, about a minute,
#                    cached in /var/cache/gpuguard)
# kubectl (with kustomize v5) is the referee of tests/scripts/deploy.sh: the
# API server's strategic merge and kustomize's, and the install's render. It
# is no Debian package of a usable age (Debian 12's kubernetes-client is
# 1.20, with kustomize v2), so it is not installed here; without it those
# checks are skipped by name.
# The CUDA headers for the same test come with the CUDA toolkit (nvcc); where
# it is absent, that check is reported as skipped.
PKGS="build-essential clang-format libamdhip64-dev libunwind8 uthash-dev jq prometheus gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user-static spin nodejs npm python3-yaml debootstrap"
missing=
for p in $PKGS; do
	case $p in
	nodejs) command -v node >/dev/null 2>&1 && continue ;;
	npm) command -v npm >/dev/null 2>&1 && continue ;;
	esac
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
	echo "gpuguard: please install:$missing" >&2
	exit 0
fi
echo "gpuguard: installing:$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null && apt-get install -y -qq --no-install-recommends $missing >/dev/null ||
	{ echo "gpuguard: apt-get install$missing failed" >&2; exit 1; }
