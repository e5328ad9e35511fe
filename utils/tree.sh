#!/usr/bin/env bash
# The assembled tree: upstream's source with our patches and files, under build/.
#
#   build/valkey/     the tree we build and test: a git repository whose
#                     first commit (tag `upstream`) is the pristine tarball,
#                     whose second (tag `debian`) adds Debian's security
#                     patches, and whose third (tag `base`) adds our fixes of
#                     upstream's advisories (patches/security/) that neither
#                     that release nor Debian carries. Our patches/ sit on
#                     top as uncommitted edits, and our own files from src/
#                     and tests/ are symlinked in at the same paths.
#   build/upstream/   the reference: a checkout of tag `base`, without our
#                     other patches.
#   build/applied/    a copy of each patch as it was last applied, so that
#                     an edit made in build/valkey can be told apart from a
#                     patch that changed in the repo.
#
# Patches mirror upstream's paths: patches/src/t_zset.c.diff holds the
# change to src/t_zset.c. Text before the first `diff --git` line is the
# patch's header (what and why) and is kept when the diff is re-exported.
#
# Subcommands: assemble | check | export | upstream | link-programs | security
# (which fix of each advisory the tree holds) | security-carrier (the choice
# for a given release and Debian patches, for the tests)
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/deps/valkey.pin"
BUILD=$ROOT/build
TREE=$BUILD/valkey
REF=$BUILD/upstream
APPLIED=$BUILD/applied
# The upstream version being built: the pinned one, or the later release
# deps/fetch.sh took when Debian no longer serves it (set by assemble).
UPSTREAM_VERSION=$VALKEY_VERSION
# The commit our patches/ are diffs against. A tree assembled before tag
# `base` existed has its patches against `debian`.
BASE=base
if [ -d "$TREE/.git" ] && ! git -C "$TREE" rev-parse -q --verify refs/tags/base >/dev/null; then
    BASE=debian
fi
SECURITY=$ROOT/patches/security
OVERLAY_DIRS="src tests"
PROGRAMS="valkey-server valkey-cli valkey-benchmark valkey-check-rdb valkey-check-aof valkey-sentinel"

die() {
    echo "tree.sh: $*" >&2
    exit 1
}

in_tree() { git -C "$TREE" "$@"; }
commit_in() {
    git -C "$1" -c user.name="valkey fork build" -c user.email="build@localhost" \
        -c commit.gpgsign=false commit -q "${@:2}"
}

# The diff of one upstream file against the base, in the form patches/ keeps:
# without git's `index` line, so that a patch edited by hand still compares
# equal to the tree it produces.
tree_diff() {
    in_tree -c core.quotepath=off diff --no-color --no-ext-diff --no-renames \
        --src-prefix=a/ --dst-prefix=b/ "$BASE" -- "$1" | sed '/^index [0-9a-f]*\.\.[0-9a-f]*/d'
}

# A patch file without its header.
patch_body() { [ -f "$1" ] && sed -n '/^diff --git /,$p' "$1" || true; }
patch_header() { sed '/^diff --git /,$d' "$1"; }

patch_files() { (cd "$ROOT/patches" && find . -path ./security -prune -o -name '*.diff' -type f -print | sed 's|^\./||' | sort); }
applied_files() { [ -d "$APPLIED" ] && (cd "$APPLIED" && find . -name '*.diff' -type f | sed 's|^\./||' | sort) || true; }
edited_files() { in_tree -c core.quotepath=off diff --name-only --no-renames "$BASE" | sort; }

# Our own files: what git tracks or would track under src/ and tests/.
own_files() {
    if git -C "$ROOT" rev-parse --git-dir >/dev/null 2>&1; then
        git -C "$ROOT" ls-files --cached --others --exclude-standard -- $OVERLAY_DIRS
    else
        (cd "$ROOT" && find $OVERLAY_DIRS -type f ! -name 'valkey-*')
    fi | sort -u
}

is_overlay_link() {
    [ -L "$TREE/$1" ] && case "$(readlink -f "$TREE/$1")" in "$ROOT"/src/* | "$ROOT"/tests/*) true ;; *) false ;; esac
}

# Files in the tree that upstream does not have and that are not ours.
stray_files() {
    in_tree -c core.quotepath=off ls-files --others --exclude-standard | while read -r f; do
        is_overlay_link "$f" || echo "$f"
    done
}

# --- Building the tree ---

# What deps/fetch.sh settled on, one line, tab-separated: the upstream
# version, the orig tarball, the Debian packaging tarball. Not always the pin:
# a later release of the series when Debian no longer serves the pinned one.
fetched_source() { "$ROOT/deps/fetch.sh"; }

# Names the source a tree was assembled from, our security patches
# included; a different one re-assembles.
source_id() {
    local fixes=none
    if [ -n "$(security_patches)" ]; then
        fixes=$(cd "$SECURITY" && security_patches | xargs cat | sha256sum | cut -c1-16)
    fi
    echo "$1 $(basename "$2") $(basename "$3") security:$fixes"
}

# --- Our fixes of upstream's advisories (patches/security/) ---
#
# One diff an advisory, named after it, with a header that says what the
# flaw is and how it is fixed, and three fields that decide whether it is
# applied:
#   Advisory: GHSA-...            upstream's advisory
#   Aliases: CVE-...              its other names, once published (may be empty)
#   Fixed-upstream-in: 9.1.3      the first release of the series with upstream's fix
# Ours steps aside when the upstream being built is that release or later,
# or when one of Debian's security patches taken names the advisory or an
# alias (in its file name or its text): then upstream's own fix is in.

security_patches() { [ -d "$SECURITY" ] && (cd "$SECURITY" && find . -name '*.diff' -type f | sed 's|^\./||' | sort) || true; }
header_field() { patch_header "$1" | sed -n "s/^$2:[[:space:]]*//p" | head -1; }

# Whether version $1 is $2 or later.
version_at_least() { [ "$(printf '%s\n%s\n' "$1" "$2" | sort -V | head -1)" = "$2" ]; }

# Which fix of advisory patch $1 is in upstream $2 with Debian's patches $4
# (names, from folder $3): prints "upstream ..." or "debian ...", or nothing
# when ours is needed.
upstream_carries() {
    local patch=$1 version=$2 dir=$3 taken=$4 fixed id p
    fixed=$(header_field "$patch" Fixed-upstream-in)
    if [ -n "$fixed" ] && version_at_least "$version" "$fixed"; then
        echo "upstream's own fix (upstream $version; fixed in $fixed)"
        return
    fi
    for id in $(header_field "$patch" Advisory) $(header_field "$patch" Aliases); do
        for p in $taken; do
            if case "$p" in *"$id"*) true ;; *) false ;; esac || grep -qiF -- "$id" "$dir/$p"; then
                echo "upstream's own fix (Debian's $p)"
                return
            fi
        done
    done
}

# Applies to tree $1 (upstream $2, Debian's patches $4 from folder $3) each
# security patch of ours that upstream does not carry, and records in
# .git/fork-security which fix of each advisory the tree holds.
apply_security() {
    local tree=$1 version=$2 dir=$3 taken=$4 rel patch advisory carrier
    : >"$tree/.git/fork-security"
    for rel in $(security_patches); do
        patch=$SECURITY/$rel
        advisory=$(header_field "$patch" Advisory)
        [ -n "$advisory" ] || die "patches/security/$rel: its header names no Advisory"
        carrier=$(upstream_carries "$patch" "$version" "$dir" "$taken")
        if [ -z "$carrier" ]; then
            patch_body "$patch" | git -C "$tree" apply --whitespace=nowarn - ||
                die "patches/security/$rel does not apply to upstream $version with Debian's patches.
  If this upstream carries the fix under a name its header does not list, add it to Aliases
  (or set Fixed-upstream-in); otherwise refresh the patch."
            carrier="ours (patches/security/$rel)"
        fi
        echo "$advisory: $carrier" >>"$tree/.git/fork-security"
    done
}

# Says which fix of each advisory the tree holds; make prints it every build.
report_security() {
    [ -s "$TREE/.git/fork-security" ] || return 0
    sed 's/^/Security fix in use: /' "$TREE/.git/fork-security" >&2
}

create_tree() {
    local version=$1 orig=$2 deb=$3 new=$BUILD/valkey.new debsrc=$BUILD/valkey.debian-src taken=""
    rm -rf "$new"
    mkdir -p "$new"
    # .tar.gz or .tar.xz, as Debian ships it.
    tar -xf "$orig" -C "$new" --strip-components=1
    git -C "$new" init -q
    git -C "$new" add -A -f .
    commit_in "$new" -m "Valkey $version, pristine ($(basename "$orig"))"
    git -C "$new" tag upstream

    rm -rf "$debsrc"
    mkdir -p "$debsrc"
    tar -xf "$deb" -C "$debsrc"
    while read -r p; do
        p=${p%%#*}
        p=${p%% *}
        [ -n "$p" ] || continue
        for glob in $DEBIAN_PATCHES; do
            # shellcheck disable=SC2254
            case "$p" in $glob)
                patch -d "$new" -p1 -s --no-backup-if-mismatch -F0 <"$debsrc/debian/patches/$p" ||
                    die "Debian's $p does not apply to $(basename "$orig")"
                taken="$taken $p"
                ;;
            esac
        done
    done <"$debsrc/debian/patches/series"
    git -C "$new" add -A -f .
    commit_in "$new" --allow-empty -m "Debian security patches from $(basename "$deb")" -m "Applied:$taken"
    git -C "$new" tag debian
    echo "Assembled upstream $version with Debian's security patches:${taken:- none in $(basename "$deb")}" >&2

    apply_security "$new" "$version" "$debsrc/debian/patches" "$taken"
    rm -rf "$debsrc"
    git -C "$new" add -A -f .
    commit_in "$new" --allow-empty -m "Fixes of upstream's advisories from patches/security/" \
        -m "$(cat "$new/.git/fork-security" | grep . || echo "No advisory patches.")"
    git -C "$new" tag base
    BASE=base
    source_id "$version" "$orig" "$deb" >"$new/.git/fork-source"

    rm -rf "$TREE" "$APPLIED"
    mv "$new" "$TREE"
}

# Dies unless the tree's version of upstream file $1 is what patches/ last
# gave it: edits made in build/valkey must be exported before the file is
# re-assembled.
require_exported() {
    local f=$1
    if [ "$(tree_diff "$f")" != "$(patch_body "$APPLIED/$f.diff")" ]; then
        die "build/valkey/$f holds edits that patches/ does not, and the repo changed its patch.
  Keep the edits:  make patches     (then reconcile with the repo's version)
  Drop the edits:  git -C build/valkey checkout $BASE -- $f     (then run make again)"
    fi
}

restore_base() {
    if in_tree cat-file -e "$BASE:$1" 2>/dev/null; then
        in_tree checkout -q "$BASE" -- "$1"
    else
        rm -f "$TREE/$1"
    fi
}

sync_patches() {
    local rel f
    mkdir -p "$APPLIED"
    for rel in $(patch_files); do
        f=${rel%.diff}
        cmp -s "$ROOT/patches/$rel" "$APPLIED/$rel" && continue
        if [ "$(patch_body "$ROOT/patches/$rel")" != "$(patch_body "$APPLIED/$rel")" ]; then
            require_exported "$f"
            restore_base "$f"
            patch_body "$ROOT/patches/$rel" | in_tree apply --whitespace=nowarn - ||
                die "patches/$rel does not apply to upstream $UPSTREAM_VERSION$(not_pinned_note)"
            echo "Applied patches/$rel" >&2
        fi
        mkdir -p "$(dirname "$APPLIED/$rel")"
        cp "$ROOT/patches/$rel" "$APPLIED/$rel"
    done
    for rel in $(applied_files); do
        [ -f "$ROOT/patches/$rel" ] && continue
        f=${rel%.diff}
        require_exported "$f"
        restore_base "$f"
        rm -f "$APPLIED/$rel"
        echo "Reverted $f (its patch is gone)" >&2
    done
}

# Why the version built is not the pinned one, when it is not.
not_pinned_note() {
    [ "$UPSTREAM_VERSION" = "$VALKEY_VERSION" ] && return
    echo ".
  Debian no longer serves the pinned $VALKEY_VERSION, so deps/fetch.sh took $UPSTREAM_VERSION: refresh
  the patch for $UPSTREAM_VERSION and move the pin to it (README: Moving to a newer upstream)."
}

# Symlinks our own files into the tree; a file of ours never replaces one
# of upstream's (those change through patches/).
sync_overlay() {
    local f dest want
    for f in $(own_files); do
        dest=$TREE/$f
        want=$(realpath -s --relative-to="$(dirname "$dest")" "$ROOT/$f")
        [ -L "$dest" ] && [ "$(readlink "$dest")" = "$want" ] && continue
        if in_tree cat-file -e "$BASE:$f" 2>/dev/null; then
            die "our $f has the path of an upstream file; upstream files change through patches/."
        fi
        [ ! -e "$dest" ] || [ -L "$dest" ] || die "build/valkey/$f exists and is not ours; move it away first."
        mkdir -p "$(dirname "$dest")"
        ln -sfn "$want" "$dest"
    done
    # Links to files of ours that are gone.
    for d in $OVERLAY_DIRS; do
        find "$TREE/$d" -xtype l 2>/dev/null | while read -r l; do
            case "$(readlink -m "$l")" in "$ROOT"/src/* | "$ROOT"/tests/*) rm -f "$l" ;; esac
        done
    done
}

assemble() {
    local src version orig deb
    src=$(fetched_source)
    IFS=$'\t' read -r version orig deb <<<"$src"
    if [ -z "$version" ] || [ ! -f "$orig" ] || [ ! -f "$deb" ]; then
        die "deps/fetch.sh named no usable source: '$src'"
    fi
    UPSTREAM_VERSION=$version
    if [ -d "$TREE/.git" ] && [ "$(cat "$TREE/.git/fork-source" 2>/dev/null)" != "$(source_id "$version" "$orig" "$deb")" ]; then
        check >/dev/null || die "the upstream pin or Debian revision changed, and build/valkey holds edits
  that patches/ does not. Export them (make patches) or drop them, then run make again."
        echo "Upstream source changed: re-assembling build/valkey." >&2
        rm -rf "$TREE"
    fi
    [ -d "$TREE/.git" ] || create_tree "$version" "$orig" "$deb"
    sync_patches
    sync_overlay
    report_security
}

# --- The patch workflow ---

check() {
    local status=0 f rel
    [ -d "$TREE/.git" ] || {
        echo "No assembled tree yet (run make): nothing to check."
        return 0
    }
    for f in $(edited_files); do
        if [ "$(tree_diff "$f")" != "$(patch_body "$ROOT/patches/$f.diff")" ]; then
            echo "  $f: edited in build/valkey, not exported to patches/"
            status=1
        fi
    done
    for rel in $(patch_files); do
        f=${rel%.diff}
        if [ -z "$(tree_diff "$f")" ]; then
            echo "  $f: patches/$rel is not in build/valkey (run make)"
            status=1
        fi
    done
    for f in $(stray_files); do
        echo "  $f: new file in build/valkey; new files of ours belong in src/ or tests/ of the repo"
        status=1
    done
    return $status
}

export_patches() {
    local f rel dest header
    [ -d "$TREE/.git" ] || die "no assembled tree yet: run make first."
    for f in $(edited_files); do
        dest=$ROOT/patches/$f.diff
        if [ "$(tree_diff "$f")" = "$(patch_body "$dest")" ]; then
            continue
        fi
        header="$f: say what this changes and why."$'\n'
        [ -f "$dest" ] && header=$(patch_header "$dest")$'\n'
        mkdir -p "$(dirname "$dest")" "$(dirname "$APPLIED/$f.diff")"
        { printf '%s' "$header"; tree_diff "$f"; } >"$dest.tmp"
        mv "$dest.tmp" "$dest"
        cp "$dest" "$APPLIED/$f.diff"
        echo "exported patches/$f.diff"
    done
    for rel in $(patch_files); do
        f=${rel%.diff}
        if [ -z "$(tree_diff "$f")" ]; then
            rm -f "$ROOT/patches/$rel" "$APPLIED/$rel"
            find "$ROOT/patches" -type d -empty -delete
            echo "removed patches/$rel (build/valkey no longer changes $f)"
        fi
    done
    for f in $(stray_files); do
        echo "not exported: $f is a new file; new files of ours belong in src/ or tests/ of the repo" >&2
    done
}

# --- The reference build and the programs ---

upstream() {
    local want version
    want=$(in_tree rev-parse "$BASE")
    read -r version _ <"$TREE/.git/fork-source"
    if [ ! -d "$REF/.git" ] || [ "$(git -C "$REF" rev-parse HEAD)" != "$want" ]; then
        rm -rf "$REF"
        git clone -q --no-checkout "$TREE" "$REF"
        git -C "$REF" checkout -q "$want"
        echo "Reference tree: build/upstream at upstream $version with Debian's security patches and ours." >&2
    fi
}

link_programs() {
    local p
    for p in $PROGRAMS; do
        [ -x "$TREE/src/$p" ] && ln -sfn "../build/valkey/src/$p" "$ROOT/src/$p"
    done
    return 0
}

case "${1:-}" in
assemble) assemble ;;
check)
    if ! out=$(check); then
        echo "build/valkey holds edits that patches/ does not:"
        echo "$out"
        echo "Export them with: make patches"
        exit 1
    fi
    echo "${out:-patches/ and build/valkey agree.}"
    ;;
export) export_patches ;;
security) report_security 2>&1 ;;
# Which fix of patches/security/ADVISORY.diff a tree of upstream VERSION with
# Debian's patches FILE... would hold (tests/unit/fork-build.tcl asks).
security-carrier)
    [ $# -ge 3 ] || die "usage: $0 security-carrier ADVISORY.diff VERSION [DEBIAN-PATCH ...]"
    name=$2 version=$3
    shift 3
    dir=$(mktemp -d)
    for f in "$@"; do cp "$f" "$dir/"; done
    carrier=$(upstream_carries "$SECURITY/$name" "$version" "$dir" "$(for f in "$@"; do basename "$f"; done)")
    rm -rf "$dir"
    echo "${carrier:-ours (patches/security/$name)}"
    ;;
upstream) upstream ;;
link-programs) link_programs ;;
*) die "usage: $0 assemble|check|export|upstream|link-programs|security|security-carrier" ;;
esac
