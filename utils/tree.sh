#!/usr/bin/env bash
# The assembled tree: upstream's source with our patches and files, under build/.
#
#   build/valkey/     the tree we build and test: a git repository whose
#                     first commit (tag `upstream`) is the pristine tarball
#                     and whose second (tag `debian`) adds Debian's security
#                     patches. Our patches/ sit on top as uncommitted edits,
#                     and our own files from src/ and tests/ are symlinked in
#                     at the same paths.
#   build/upstream/   the reference: a checkout of tag `debian`, unpatched.
#   build/applied/    a copy of each patch as it was last applied, so that
#                     an edit made in build/valkey can be told apart from a
#                     patch that changed in the repo.
#
# Patches mirror upstream's paths: patches/src/t_zset.c.diff holds the
# change to src/t_zset.c. Text before the first `diff --git` line is the
# patch's header (what and why) and is kept when the diff is re-exported.
#
# Subcommands: assemble | check | export | upstream | link-programs
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
BASE=debian
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

patch_files() { (cd "$ROOT/patches" && find . -name '*.diff' -type f | sed 's|^\./||' | sort); }
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

# Names the source a tree was assembled from; a different one re-assembles.
source_id() { echo "$1 $(basename "$2") $(basename "$3")"; }

create_tree() {
    local version=$1 orig=$2 deb=$3 new=$BUILD/valkey.new debsrc=$BUILD/valkey.new/.debian-src taken=""
    rm -rf "$new"
    mkdir -p "$new"
    # .tar.gz or .tar.xz, as Debian ships it.
    tar -xf "$orig" -C "$new" --strip-components=1
    git -C "$new" init -q
    git -C "$new" add -A -f .
    commit_in "$new" -m "Valkey $version, pristine ($(basename "$orig"))"
    git -C "$new" tag upstream

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
    rm -rf "$debsrc"
    git -C "$new" add -A -f .
    commit_in "$new" --allow-empty -m "Debian security patches from $(basename "$deb")" -m "Applied:$taken"
    git -C "$new" tag "$BASE"
    source_id "$version" "$orig" "$deb" >"$new/.git/fork-source"
    echo "Assembled upstream $version with Debian's security patches:${taken:- none in $(basename "$deb")}" >&2

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
        echo "Reference tree: build/upstream at upstream $version with Debian's security patches." >&2
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
upstream) upstream ;;
link-programs) link_programs ;;
*) die "usage: $0 assemble|check|export|upstream|link-programs" ;;
esac
