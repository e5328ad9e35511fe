#!/usr/bin/env bash
# Installs the Debian packages the build, the tests and the benchmarks need,
# when they are missing. As root it runs apt-get; otherwise it names them.
#
#   utils/install-deps.sh build|test|fuzz|bench ...
set -euo pipefail

declare -A NEED=(
    [build]="build-essential pkg-config git patch xz-utils dpkg-dev debian-archive-keyring libzstd-dev"
    [test]="tcl libcmocka-dev procps python3 libgtest-dev libgmock-dev"
    [fuzz]="clang libclang-rt-14-dev"
    [bench]="python3 python3-matplotlib util-linux fortunes-min fortunes iso-codes"
)

missing=()
for group in "${@:-build}"; do
    [ -n "${NEED[$group]+x}" ] || { echo "install-deps.sh: unknown group '$group'" >&2; exit 2; }
    for pkg in ${NEED[$group]}; do
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
    done
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" != 0 ]; then
    echo "Missing Debian packages: ${missing[*]}" >&2
    echo "Install them with: sudo apt-get install ${missing[*]}" >&2
    exit 1
fi
echo "Installing Debian packages: ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get -qq update >/dev/null || true
apt-get -qq install -y --no-install-recommends "${missing[@]}" >/dev/null
