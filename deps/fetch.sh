#!/usr/bin/env bash
# Brings the pinned upstream source (deps/valkey.pin) into build/dl/.
#
# apt's own client does the download, from a private configuration kept in
# build/apt/: one deb-src line per suite the pin names, signed by Debian's
# archive keyring, its own lists and cache. The machine's apt setup is never
# read for sources nor changed.
#
# The pinned version is taken from the first suite that carries it. When
# none carries it any more (Debian replaced it with a later release of the
# same series), the newest later release of the series that they carry is
# taken instead, verified by apt against Debian's signed index, and one line
# on stderr says so and how to move the pin: a fresh machine still builds,
# and only a patch that no longer applies stops it (utils/tree.sh).
#
# What a download settled on is recorded in build/dl/fetched; a record that
# still matches the pin and whose files still match their checksums is
# reused without touching the network, so a rebuild works offline.
# `FETCH_REFRESH=1` asks the archive again (a newer Debian revision, or a
# newer release of the series once the pinned one is gone).
#
# Prints one line for utils/tree.sh, tab-separated: the upstream version
# built, the orig tarball's path, the Debian packaging tarball's path.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/deps/valkey.pin"
DL=$ROOT/build/dl
APT=$ROOT/build/apt
RECORD=$DL/fetched
# A record is only reused for the pin it was made under: moving the pin
# fetches (or finds in the cache) what the new pin names.
PIN_ID="$VALKEY_VERSION $DEBIAN_UPSTREAM_VERSION $ORIG_SHA256"

die() {
    echo "deps/fetch.sh: $*" >&2
    exit 1
}

sha256_of() { sha256sum "$1" | cut -d' ' -f1; }

# The fallback revision uses the pinned orig tarball, so it must be a
# revision of the pinned upstream version.
case "$DEBIAN_FALLBACK_VERSION" in
"$DEBIAN_UPSTREAM_VERSION"-*) ;;
*) die "deps/valkey.pin: DEBIAN_FALLBACK_VERSION $DEBIAN_FALLBACK_VERSION is not a revision of $DEBIAN_UPSTREAM_VERSION." ;;
esac

orig_ok() {
    [ -f "$DL/$ORIG_TARBALL" ] && [ "$(sha256_of "$DL/$ORIG_TARBALL")" = "$ORIG_SHA256" ]
}

# Newest Debian packaging tarball of the pinned upstream version in the cache
# (one copied there by hand counts: see the message when the archive is
# unreachable).
cached_debian_tarball() {
    ls "$DL/${DEBIAN_SOURCE}_${DEBIAN_UPSTREAM_VERSION}"-*.debian.tar.* 2>/dev/null | sort -V | tail -n 1 || true
}

# Debian version -> upstream version: no epoch, no Debian revision.
upstream_of() {
    local v=$1
    v=${v#*:}
    echo "${v%-*}"
}

# Debian's upstream version -> Valkey's own (9.1.3+dfsg1 -> 9.1.3), which the
# server reports and utils/tree.sh names.
valkey_of() { echo "${1%%[+~]*}"; }

# --- The record of the last download ---

# Written only after the files were verified (by apt against the signed
# index, or against the pin's checksums); the checksums are kept so that a
# damaged cache is noticed and fetched again.
write_record() {
    local version=$1 orig=$2 orig_sha=$3 deb=$4 deb_sha=$5 upstream valkey=$VALKEY_VERSION
    upstream=$(upstream_of "$version")
    [ "$upstream" = "$DEBIAN_UPSTREAM_VERSION" ] || valkey=$(valkey_of "$upstream")
    {
        echo "# Written by deps/fetch.sh: the source the last download settled on, reused"
        echo "# without the network while deps/valkey.pin names the same upstream."
        echo "pin $PIN_ID"
        echo "version $version"
        echo "upstream $upstream"
        echo "valkey $valkey"
        echo "orig $orig $orig_sha"
        echo "debian $deb $deb_sha"
    } >"$RECORD.tmp"
    mv "$RECORD.tmp" "$RECORD"
}

# Reads the record into REC_*; fails when there is none, it was made under
# another pin, or its files are missing or changed.
read_record() {
    local key a b
    REC_PIN="" REC_VERSION="" REC_UPSTREAM="" REC_VALKEY="" REC_ORIG="" REC_ORIG_SHA="" REC_DEB="" REC_DEB_SHA=""
    [ -f "$RECORD" ] || return 1
    while read -r key a b; do
        case "$key" in
        pin) REC_PIN="$a $b" ;;
        version) REC_VERSION=$a ;;
        upstream) REC_UPSTREAM=$a ;;
        valkey) REC_VALKEY=$a ;;
        orig) REC_ORIG=$a REC_ORIG_SHA=$b ;;
        debian) REC_DEB=$a REC_DEB_SHA=$b ;;
        esac
    done <"$RECORD"
    [ "$REC_PIN" = "$PIN_ID" ] && [ -n "$REC_VERSION" ] && [ -n "$REC_VALKEY" ] &&
        [ -n "$REC_ORIG" ] && [ -f "$DL/$REC_ORIG" ] && [ "$(sha256_of "$DL/$REC_ORIG")" = "$REC_ORIG_SHA" ] &&
        [ -n "$REC_DEB" ] && [ -f "$DL/$REC_DEB" ] && [ "$(sha256_of "$DL/$REC_DEB")" = "$REC_DEB_SHA" ]
}

# One line, on every build from a successor (it is not what the pin names).
successor_notice() {
    local how=$1
    echo "deps/fetch.sh: Debian no longer serves $DEBIAN_SOURCE $DEBIAN_UPSTREAM_VERSION; building $REC_VALKEY ($REC_VERSION, $how). To make it the pin: set VALKEY_VERSION=$REC_VALKEY, DEBIAN_UPSTREAM_VERSION=$REC_UPSTREAM, ORIG_TARBALL=$REC_ORIG and ORIG_SHA256=$REC_ORIG_SHA in deps/valkey.pin (README: Moving to a newer upstream)." >&2
}

# --- Asking the archive ---

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

# "suite version" for each revision of the source package in the index
# (madison names a suite as our sources.list does, not by its Release file).
index_versions() {
    # shellcheck disable=SC2046
    apt-cache $(apt_opts) madison "$DEBIAN_SOURCE" 2>/dev/null |
        awk -F'|' '$3 ~ /Sources[[:space:]]*$/ { gsub(/[[:space:]]/, "", $2); split($3, w, " "); sub(/\/.*/, "", w[2]); print w[2], $2 }' || true
}

# The newest of the versions on stdin (Debian's ordering, not sort -V's).
newest_version() {
    local v best=""
    while read -r v; do
        [ -n "$v" ] || continue
        if [ -z "$best" ] || dpkg --compare-versions "$v" gt "$best"; then best=$v; fi
    done
    echo "$best"
}

# The versions on stdin that are revisions of the pinned upstream version.
pinned_revisions() {
    local v
    while read -r v; do
        if [ "$(upstream_of "$v")" = "$DEBIAN_UPSTREAM_VERSION" ]; then echo "$v"; fi
    done
}

# The versions on stdin that are revisions of a later release of the pin's
# series (an older release would undo fixes the pin already has).
successor_revisions() {
    local v up
    while read -r v; do
        up=$(upstream_of "$v")
        case "$up" in
        "$VALKEY_SERIES".*) if dpkg --compare-versions "$up" gt "$DEBIAN_UPSTREAM_VERSION"; then echo "$v"; fi ;;
        esac
    done
}

# The newest revision of the pinned upstream version in the first suite that
# carries one: the pin's suites are in order of preference (testing's
# revision has been through migration, unstable's may not have).
pinned_revision() {
    local index=$1 suite v
    for suite in $DEBIAN_SUITES; do
        v=$(awk -v s="$suite" '$1 == s { print $2 }' <<<"$index" | pinned_revisions | newest_version)
        if [ -n "$v" ]; then
            echo "$v"
            return
        fi
    done
}

# The newest later release of the pin's series in any of the suites.
successor_revision() { awk '{ print $2 }' <<<"$1" | successor_revisions | newest_version; }

# Downloads one revision with apt (which checks each file against the signed
# index) and records it. Fails if apt cannot download it.
fetch_revision() {
    local version=$1 uris orig deb orig_sha deb_sha
    # The file names and checksums the signed index gives for this revision,
    # asked from an empty directory: apt leaves out the files it finds there.
    rm -rf "$APT/uris" && mkdir -p "$APT/uris"
    # shellcheck disable=SC2046
    uris=$(cd "$APT/uris" && apt-get $(apt_opts) -qq source --print-uris "$DEBIAN_SOURCE=$version" 2>"$APT/source.log") || return 1
    orig=$(awk '$2 ~ /\.orig\.tar\.[a-z0-9]+$/ { print $2 }' <<<"$uris")
    deb=$(awk '$2 ~ /\.debian\.tar\.[a-z0-9]+$/ { print $2 }' <<<"$uris")
    orig_sha=$(awk -v f="$orig" '$2 == f { sub(/^SHA256:/, "", $4); print $4 }' <<<"$uris")
    deb_sha=$(awk -v f="$deb" '$2 == f { sub(/^SHA256:/, "", $4); print $4 }' <<<"$uris")
    if [ "$(wc -w <<<"$orig $deb")" != 2 ] || [ ${#orig_sha} != 64 ] || [ ${#deb_sha} != 64 ]; then
        die "$DEBIAN_SOURCE $version is not one orig tarball and one debian tarball with SHA256 sums;
  the build cannot take it. apt lists:
$uris"
    fi
    # A pinned tarball the index lists with another checksum is not ours:
    # stop before downloading it.
    if [ "$orig" = "$ORIG_TARBALL" ] && [ "$orig_sha" != "$ORIG_SHA256" ]; then
        die "Debian's index lists $ORIG_TARBALL with sha256 $orig_sha, not the pinned $ORIG_SHA256.
  Nothing was downloaded or built. Either the archive now serves a different tarball
  under the same name (do not build from it), or deps/valkey.pin is out of date."
    fi

    # shellcheck disable=SC2046
    (cd "$DL" && apt-get $(apt_opts) -qq source --download-only "$DEBIAN_SOURCE=$version" >"$APT/source.log" 2>&1) || return 1
    if [ "$(sha256_of "$DL/$orig")" != "$orig_sha" ] || [ "$(sha256_of "$DL/$deb")" != "$deb_sha" ]; then
        die "apt downloaded $orig and $deb, but they do not match Debian's index; nothing was built."
    fi
    write_record "$version" "$orig" "$orig_sha" "$deb" "$deb_sha"
    echo "Downloaded $DEBIAN_SOURCE $version." >&2
}

download() {
    local mirror index version suite
    mirror=$(debian_mirror)
    [ -n "$mirror" ] || die "no Debian archive found in the machine's apt sources; set DEBIAN_MIRROR to one (its URL ends in /debian)."
    [ -r "$DEBIAN_KEYRING" ] || die "$DEBIAN_KEYRING is missing: install debian-archive-keyring (utils/install-deps.sh does)."
    command -v apt-get >/dev/null || die "apt-get is missing: this build fetches upstream with Debian's apt."

    mkdir -p "$APT/sources.list.d" "$APT/lists/partial" "$APT/cache/archives/partial" "$DL"
    for suite in $DEBIAN_SUITES; do
        echo "deb-src [signed-by=$DEBIAN_KEYRING] $mirror $suite main"
    done >"$APT/sources.list"

    echo "Fetching $DEBIAN_SOURCE $DEBIAN_UPSTREAM_VERSION from Debian $DEBIAN_SUITES ($mirror) ..." >&2
    # shellcheck disable=SC2046
    if ! apt-get $(apt_opts) -qq update >"$APT/update.log" 2>&1 || grep -qE '^E: |Failed to fetch' "$APT/update.log"; then
        sed 's/^/  /' "$APT/update.log" >&2
        die "could not read the source index of Debian $DEBIAN_SUITES (network down, or the mirror unreachable).
  Nothing was built. Retry when the archive is reachable, set DEBIAN_MIRROR to another
  Debian mirror, or copy a verified $ORIG_TARBALL and its debian.tar.xz into build/dl/."
    fi
    index=$(index_versions)

    version=$(pinned_revision "$index")
    if [ -z "$version" ]; then
        version=$(successor_revision "$index")
        [ -n "$version" ] || die "Debian $DEBIAN_SUITES carries neither $DEBIAN_SOURCE $DEBIAN_UPSTREAM_VERSION nor a newer $VALKEY_SERIES.x (it has: $(awk '{ print $2 " (" $1 ")" }' <<<"$index" | paste -sd' ' -)).
  Nothing was built. Move the pin in deps/valkey.pin to what it carries (README: 'Moving to a newer upstream')."
    fi

    fetch_revision "$version" && return
    sed 's/^/  /' "$APT/source.log" >&2
    if [ "$version" = "$DEBIAN_FALLBACK_VERSION" ]; then
        echo "apt-get could not download $DEBIAN_SOURCE $version; fetching the pinned files from the pool." >&2
    else
        echo "apt-get could not download $DEBIAN_SOURCE $version; trying the pinned $DEBIAN_FALLBACK_VERSION." >&2
    fi
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
    write_record "$DEBIAN_FALLBACK_VERSION" "$ORIG_TARBALL" "$ORIG_SHA256" "$deb" "$DEBIAN_FALLBACK_SHA256"
    echo "Downloaded $DEBIAN_SOURCE $DEBIAN_FALLBACK_VERSION." >&2
}

urlencode() { sed 's/+/%2b/g' <<<"$1"; }

fetch_checked() {
    rm -f "$2"
    /usr/lib/apt/apt-helper -o APT::Sandbox::User=root -qq download-file "$1" "$2" "SHA256:$3" >"$APT/fallback.log" 2>&1 && return 0
    sed 's/^/  /' "$APT/fallback.log" >&2
    rm -f "$2"
    return 1
}

emit() { printf '%s\t%s\t%s\n' "$1" "$DL/$2" "$DL/$3"; }

# The record of the last verified download comes first, so that a successor
# taken once keeps being built (not the pinned files still in the cache).
if [ "${FETCH_REFRESH:-0}" != 1 ] && read_record; then
    [ "$REC_UPSTREAM" = "$DEBIAN_UPSTREAM_VERSION" ] ||
        successor_notice "verified by apt against Debian's signed index when fetched; cached in build/dl/"
    emit "$REC_VALKEY" "$REC_ORIG" "$REC_DEB"
    exit 0
fi

# A cache without a record for this pin (files copied in by hand): the
# pinned version, its tarball checked against the pin. A record whose files
# no longer match it means a damaged cache: that is fetched again instead.
debian_tarball=$(cached_debian_tarball)
if [ "${FETCH_REFRESH:-0}" != 1 ] && ! grep -qxF "pin $PIN_ID" "$RECORD" 2>/dev/null &&
    orig_ok && [ -n "$debian_tarball" ]; then
    emit "$VALKEY_VERSION" "$ORIG_TARBALL" "$(basename "$debian_tarball")"
    exit 0
fi

download
read_record || die "the download of $DEBIAN_SOURCE left no verified record in build/dl/; nothing was built."
if [ "$REC_UPSTREAM" = "$DEBIAN_UPSTREAM_VERSION" ]; then
    # Checked against the pin whichever way it came.
    if ! orig_ok; then
        actual=$( [ -f "$DL/$ORIG_TARBALL" ] && sha256_of "$DL/$ORIG_TARBALL" || echo "(no file)")
        rm -f "$DL/$ORIG_TARBALL" "$RECORD"
        die "checksum mismatch for $ORIG_TARBALL:
  expected $ORIG_SHA256
  got      $actual
  The file was removed and nothing was built. Either the archive now serves a different
  tarball under the same name (do not build from it), or deps/valkey.pin is out of date."
    fi
else
    successor_notice "verified by apt against Debian's signed index"
fi
emit "$REC_VALKEY" "$REC_ORIG" "$REC_DEB"
