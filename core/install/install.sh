#!/bin/sh
# tools/install.sh install|uninstall: `make install` and `make uninstall`.
#
# Installs under $DESTDIR$PREFIX and writes a manifest there,
# share/luaretry/install-manifest: every file and link installed, and every
# folder the install created (relative to PREFIX).  Uninstall removes
# exactly those files and links, then those folders when empty, deepest
# first, so an empty prefix is empty again and a shared one (/usr/local)
# keeps what was there before.  Environment: DESTDIR, PREFIX, BUILD (the
# build made for PREFIX), VERSION, MAJOR.
set -eu
: "${DESTDIR=}" "${PREFIX:?}" "${BUILD:?}" "${VERSION:?}" "${MAJOR:?}"
ROOT=$DESTDIR$PREFIX
MANIFEST=share/luaretry/install-manifest
NEW=$(mktemp)
WRITE_MANIFEST=0
# Even an install that failed half way leaves its manifest: uninstall can
# always take back what was put there.
finish() {
  if [ "$WRITE_MANIFEST" = 1 ] && [ -d "$ROOT/share/luaretry" ]; then
    echo "file $MANIFEST" >> "$NEW"
    { grep '^file ' "$NEW" | sort -u; grep '^dir ' "$NEW" | sort -u; } > "$ROOT/$MANIFEST"
    chmod 644 "$ROOT/$MANIFEST"
  fi
  rm -f "$NEW"
}
trap finish EXIT

# a folder and its parents under ROOT; those it creates go to the manifest
# (sh has no local variables: $1 is the one thing a recursion keeps)
folder() {
  [ "$(dirname "$1")" = . ] || folder "$(dirname "$1")"
  if [ ! -d "$ROOT/$1" ]; then
    mkdir "$ROOT/$1"
    echo "dir $1" >> "$NEW"
  fi
}

file() {  # MODE SOURCE RELATIVE-TARGET
  folder "$(dirname "$3")"
  install -m "$1" "$2" "$ROOT/$3"
  echo "file $3" >> "$NEW"
}

link() {  # TARGET RELATIVE-NAME
  ln -sf "$1" "$ROOT/$2"
  echo "file $2" >> "$NEW"
}

install_all() {
  if [ ! -d "$ROOT" ]; then
    mkdir -p "$ROOT"
    echo "dir ." >> "$NEW"
  fi
  # folders a previous install created stay recorded
  [ -f "$ROOT/$MANIFEST" ] && grep '^dir ' "$ROOT/$MANIFEST" >> "$NEW" || true
  WRITE_MANIFEST=1
  folder share/luaretry
  file 755 "$BUILD/luaretry" bin/luaretry
  file 644 core/include/luaretry.h include/luaretry.h
  file 644 core/include/luaretry_curl.h include/luaretry_curl.h
  file 644 "$BUILD/libluaretry.a" lib/libluaretry.a
  file 755 "$BUILD/libluaretry.so.$VERSION" "lib/libluaretry.so.$VERSION"
  link "libluaretry.so.$VERSION" "lib/libluaretry.so.$MAJOR"
  link "libluaretry.so.$VERSION" lib/libluaretry.so
  file 644 "$BUILD/luaretry.pc" lib/pkgconfig/luaretry.pc
  file 755 "$BUILD/luaretry.so" lib/lua/5.4/luaretry.so
  for f in lua/*.lua; do file 644 "$f" "share/luaretry/$f"; done
  for f in policies/*.lua; do file 644 "$f" "share/luaretry/$f"; done
  for f in policies/examples/*.lua policies/faults/*.lua; do
    file 644 "$f" "share/luaretry/${f#policies/}"
  done
  # every page, in the section its name ends with
  for f in core/cli/man/*.[1-9]; do
    file 644 "$f" "share/man/man${f##*.}/$(basename "$f")"
  done
  file 644 core/cli/completion/luaretry.bash share/bash-completion/completions/luaretry
  file 644 core/cli/completion/_luaretry share/zsh/site-functions/_luaretry
  for f in README.md LICENSE CHANGELOG.md; do file 644 "$f" "share/doc/luaretry/$f"; done
  # the dynamic linker's cache knows /usr/lib and /usr/local/lib only
  if [ -z "$DESTDIR" ] && [ "$(id -u)" = 0 ] && { [ "$PREFIX" = /usr/local ] || [ "$PREFIX" = /usr ]; }; then
    ldconfig || true
  fi
}

uninstall_all() {
  if [ ! -f "$ROOT/$MANIFEST" ]; then
    echo "uninstall: no $ROOT/$MANIFEST: nothing was installed there" >&2
    exit 1
  fi
  cp "$ROOT/$MANIFEST" "$NEW"
  grep '^file ' "$NEW" | cut -c6- | while read -r f; do rm -f "$ROOT/$f"; done
  # deepest first: a folder's children come after it in sorted order
  grep '^dir ' "$NEW" | cut -c5- | sort -r | while read -r d; do
    if [ "$d" = . ]; then rmdir "$ROOT" 2>/dev/null || true
    else rmdir "$ROOT/$d" 2>/dev/null || true; fi
  done
}

case "${1:-}" in
  install) install_all ;;
  uninstall) uninstall_all ;;
  *) echo "usage: tools/install.sh install|uninstall" >&2; exit 2 ;;
esac
