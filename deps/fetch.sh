#!/usr/bin/env bash
# Brings the pinned upstream source (deps/valkey.pin) into build/dl/.
#
# apt's own client does the download, from a private configuration kept in
# build/apt/: one deb-src line for the pinned suite, signed by Debian's
# archive keyring, its own lists and cache. The machine's apt setup is never
# read for sources nor changed. A complete, verified download in build/dl/
# is reused without touching the network; `FETCH_REFRESH=1` asks the
# archive for a newer Debian revision of the same upstream version.
#
# Prints the path of the Debian tarball it settled on.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/deps/valkey.pin"
DL=$ROOT/build/dl
APT=$ROOT/build/apt

die() {
    echo "deps/fetch.sh: $*" >&2
    exit 1
}

sha256_of() { sha256sum "$1" | cut -d' ' -f1; }

orig_ok() {
    [ -f "$DL/$ORIG_TARBALL" ] && [ "$(sha256_of "$DL/$ORIG_TARBALL")" = "$ORIG_SHA256" ]
}

# Newest Debian packaging tarball of the pinned upstream version in the cache.
cached_debian_tarball() {
    ls "$DL/${DEBIAN_SOURCE}_${DEBIAN_UPSTREAM_VERSION}"-*.debian.tar.xz 2>/dev/null | sort -V | tail -n 1
}

# The Debian archive the machine already uses (so a local mirror is honoured);
# DEBIAN_MIRROR overrides it.
debian_mirror() {
    if [ -n "${DEBIAN_MIRROR:-}" ]; then
        echo "$DEBIAN_MIRROR"
        return
    fi
    { cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources 2>/dev/null || true; } |
        grep -E '^[[:space:]]*(deb|URIs:)' | grep -oE 'https?://[^[:space:]]+' |
        grep -E '/debian/?$' | head -n 1 || true
}

apt_opts() {
    echo -o "Dir::Etc::SourceList=$APT/sources.list" \
        -o "Dir::Etc::SourceParts=$APT/sources.list.d" \
        -o "Dir::State::Lists=$APT/lists" \
        -o "Dir::Cache=$APT/cache" \
        -o "APT::Sandbox::User=root" \
        -o "Debug::NoLocking=1"
}

download() {
    local mirror versions version
    mirror=$(debian_mirror)
    [ -n "$mirror" ] || die "no Debian archive found in the machine's apt sources; set DEBIAN_MIRROR to one (its URL ends in /debian)."
    [ -r "$DEBIAN_KEYRING" ] || die "$DEBIAN_KEYRING is missing: install debian-archive-keyring (utils/install-deps.sh does)."
    command -v apt-get >/dev/null || die "apt-get is missing: this build fetches upstream with Debian's apt."

    mkdir -p "$APT/sources.list.d" "$APT/lists/partial" "$APT/cache/archives/partial" "$DL"
    echo "deb-src [signed-by=$DEBIAN_KEYRING] $mirror $DEBIAN_SUITE main" >"$APT/sources.list"

    echo "Fetching $DEBIAN_SOURCE $DEBIAN_UPSTREAM_VERSION from Debian $DEBIAN_SUITE ($mirror) ..." >&2
    # shellcheck disable=SC2046
    if ! apt-get $(apt_opts) -qq update >"$APT/update.log" 2>&1 || grep -qE '^E: |Failed to fetch' "$APT/update.log"; then
        sed 's/^/  /' "$APT/update.log" >&2
        die "could not read Debian $DEBIAN_SUITE's source index (network down, or the mirror unreachable).
  Nothing was built. Retry when the archive is reachable, set DEBIAN_MIRROR to another
  Debian mirror, or copy a verified $ORIG_TARBALL and its debian.tar.xz into build/dl/."
    fi

    # shellcheck disable=SC2046
    versions=$(apt-cache $(apt_opts) showsrc "$DEBIAN_SOURCE" 2>/dev/null |
        sed -n 's/^Version: //p' | grep -F "$DEBIAN_UPSTREAM_VERSION-" | sort -V || true)
    version=$(echo "$versions" | tail -n 1)
    [ -n "$version" ] || die "Debian $DEBIAN_SUITE no longer carries $DEBIAN_SOURCE $DEBIAN_UPSTREAM_VERSION.
  Move the pin in deps/valkey.pin to what it carries (README: 'Moving to a newer upstream')."

    # shellcheck disable=SC2046
    if (cd "$DL" && apt-get $(apt_opts) -qq source --download-only "$DEBIAN_SOURCE=$version" >"$APT/source.log" 2>&1); then
        echo "Downloaded $DEBIAN_SOURCE $version." >&2
        return
    fi
    sed 's/^/  /' "$APT/source.log" >&2
    echo "apt-get could not download $DEBIAN_SOURCE $version; trying the pinned $DEBIAN_FALLBACK_VERSION." >&2
    download_fallback "$mirror" || die "neither $version nor $DEBIAN_FALLBACK_VERSION could be downloaded; nothing was built. Retry later."
}

# The pinned fallback revision's packaging tarball (and the orig tarball if
# missing), straight from the pool by apt's downloader, each checked against
# its pinned sha256.
download_fallback() {
    local mirror=$1 pool deb
    pool="$mirror/pool/main/${DEBIAN_SOURCE:0:1}/$DEBIAN_SOURCE"
    deb="${DEBIAN_SOURCE}_${DEBIAN_FALLBACK_VERSION}.debian.tar.xz"
    fetch_checked "$pool/$(urlencode "$deb")" "$DL/$deb" "$DEBIAN_FALLBACK_SHA256" || return 1
    orig_ok || fetch_checked "$pool/$(urlencode "$ORIG_TARBALL")" "$DL/$ORIG_TARBALL" "$ORIG_SHA256" || return 1
    echo "Downloaded $DEBIAN_SOURCE $DEBIAN_FALLBACK_VERSION." >&2
}

urlencode() { sed 's/+/%2b/g' <<<"$1"; }

fetch_checked() {
    rm -f "$2"
    /usr/lib/apt/apt-helper -qq download-file "$1" "$2" "SHA256:$3" >"$APT/fallback.log" 2>&1 && return 0
    sed 's/^/  /' "$APT/fallback.log" >&2
    rm -f "$2"
    return 1
}

if [ "${FETCH_REFRESH:-0}" = 1 ] || ! orig_ok || [ -z "$(cached_debian_tarball)" ]; then
    download
fi

if ! orig_ok; then
    actual=$( [ -f "$DL/$ORIG_TARBALL" ] && sha256_of "$DL/$ORIG_TARBALL" || echo "(no file)")
    rm -f "$DL/$ORIG_TARBALL"
    die "checksum mismatch for $ORIG_TARBALL:
  expected $ORIG_SHA256
  got      $actual
  The file was removed and nothing was built. Either the archive now serves a different
  tarball under the same name (do not build from it), or deps/valkey.pin is out of date."
fi
debian_tarball=$(cached_debian_tarball)
[ -n "$debian_tarball" ] || die "no Debian packaging tarball for $DEBIAN_UPSTREAM_VERSION in build/dl/."
echo "$debian_tarball"
