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
#
# Neither writes nor removes outside $DESTDIR$PREFIX: install refuses to
# write through a symbolic link it did not make (a share/luaretry linking
# elsewhere), and uninstall takes from its manifest only relative paths
# without "..", reached through no symbolic link, and only the regular
# files and links there; it refuses anything else with a message.
set -eu
: "${DESTDIR=}" "${PREFIX:?}" "${BUILD:?}" "${VERSION:?}" "${MAJOR:?}"
ROOT=$DESTDIR$PREFIX
MANIFEST=share/luaretry/install-manifest
NEW=$(mktemp)
WRITE_MANIFEST=0
# Even an install that failed half way leaves its manifest: uninstall can
# always take back what was put there.
finish() {
  if [ "$WRITE_MANIFEST" = 1 ] && [ -d "$ROOT/share/luaretry" ] && [ ! -L "$ROOT/share" ] &&
     [ ! -L "$ROOT/share/luaretry" ] && [ ! -L "$ROOT/$MANIFEST" ]; then
    echo "file $MANIFEST" >> "$NEW"
    { grep '^file ' "$NEW" | sort -u; grep '^dir ' "$NEW" | sort -u; } > "$ROOT/$MANIFEST"
    chmod 644 "$ROOT/$MANIFEST"
  fi
  rm -f "$NEW"
}
trap finish EXIT

die() {
  echo "$*" >&2
  exit 1
}

# a folder and its parents under ROOT; those it creates go to the manifest
# (sh has no local variables: $1 is the one thing a recursion keeps)
folder() {
  [ "$(dirname "$1")" = . ] || folder "$(dirname "$1")"
  if [ -L "$ROOT/$1" ]; then
    die "install: $ROOT/$1 is a symbolic link (to $(readlink "$ROOT/$1")) this install did not make: refusing to write through it"
  fi
  if [ ! -d "$ROOT/$1" ]; then
    mkdir "$ROOT/$1"
    echo "dir $1" >> "$NEW"
  fi
}

file() {  # MODE SOURCE RELATIVE-TARGET
  folder "$(dirname "$3")"
  # this install makes no link where a file goes: one there is someone else's
  if [ -L "$ROOT/$3" ]; then
    die "install: $ROOT/$3 is a symbolic link (to $(readlink "$ROOT/$3")) this install did not make: refusing to write through it"
  fi
  # install(1) would copy into a folder there, not replace it
  if [ -d "$ROOT/$3" ]; then
    die "install: $ROOT/$3 is a folder, where a file goes: refusing to write into it"
  fi
  install -m "$1" "$2" "$ROOT/$3"
  echo "file $3" >> "$NEW"
}

link() {  # TARGET RELATIVE-NAME
  folder "$(dirname "$2")"
  if [ -e "$ROOT/$2" ] && [ ! -L "$ROOT/$2" ]; then
    die "install: $ROOT/$2 is there and is not a symbolic link: refusing to replace it"
  fi
  # -n: a link there is replaced, never followed into the folder it names
  ln -sfn "$1" "$ROOT/$2"
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
  # the curl helper: a library of its own (luaretry_tool.h is not installed)
  file 644 "$BUILD/libluaretry-curl.a" lib/libluaretry-curl.a
  file 755 "$BUILD/libluaretry-curl.so.$VERSION" "lib/libluaretry-curl.so.$VERSION"
  link "libluaretry-curl.so.$VERSION" "lib/libluaretry-curl.so.$MAJOR"
  link "libluaretry-curl.so.$VERSION" lib/libluaretry-curl.so
  file 644 "$BUILD/luaretry-curl.pc" lib/pkgconfig/luaretry-curl.pc
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

# Whether a manifest path is one uninstall may touch: relative, no ".."
# (nor "." but the prefix itself), and reached through no symbolic link
# under ROOT.  Prints why not on standard error.
safe_path() {
  case "$1" in
    "") echo "uninstall: an empty path in the manifest: refused" >&2; return 1 ;;
    /*) echo "uninstall: $1 in the manifest is absolute, outside $ROOT: refused" >&2; return 1 ;;
  esac
  case "/$1/" in
    */../*|*/./*|*//*) echo "uninstall: $1 in the manifest has '..', '.' or an empty part: refused" >&2; return 1 ;;
  esac
  p=$(dirname "$1")
  while [ "$p" != . ]; do
    if [ -L "$ROOT/$p" ]; then
      echo "uninstall: $1 in the manifest lies behind the symbolic link $ROOT/$p: refused" >&2
      return 1
    fi
    p=$(dirname "$p")
  done
}

uninstall_all() {
  if [ -L "$ROOT/share" ] || [ -L "$ROOT/share/luaretry" ] || [ -L "$ROOT/$MANIFEST" ] ||
     [ ! -f "$ROOT/$MANIFEST" ]; then
    echo "uninstall: no $ROOT/$MANIFEST (a regular file, reached through no symbolic link): nothing was installed there" >&2
    exit 1
  fi
  cp "$ROOT/$MANIFEST" "$NEW"
  refused=$(mktemp)
  # only the regular files and links the manifest names; the manifest last
  grep '^file ' "$NEW" | cut -c6- | grep -vxF "$MANIFEST" | while IFS= read -r f; do
    if ! safe_path "$f"; then echo x >> "$refused"
    elif [ -L "$ROOT/$f" ] || [ -f "$ROOT/$f" ]; then rm -f "$ROOT/$f"
    elif [ -e "$ROOT/$f" ]; then
      echo "uninstall: $ROOT/$f is neither a regular file nor a link: refused" >&2
      echo x >> "$refused"
    fi
  done
  rm -f "$ROOT/$MANIFEST"
  # deepest first: a folder's children come after it in sorted order
  grep '^dir ' "$NEW" | cut -c5- | sort -r | while IFS= read -r d; do
    if [ "$d" = . ]; then rmdir "$ROOT" 2>/dev/null || true
    elif ! safe_path "$d"; then echo x >> "$refused"
    elif [ ! -L "$ROOT/$d" ]; then rmdir "$ROOT/$d" 2>/dev/null || true; fi
  done
  n=$(wc -l < "$refused")
  rm -f "$refused"
  if [ "$n" -gt 0 ]; then
    echo "uninstall: $n line(s) of the manifest refused; everything else removed" >&2
    exit 1
  fi
}

case "${1:-}" in
  install) install_all ;;
  uninstall) uninstall_all ;;
  *) echo "usage: tools/install.sh install|uninstall" >&2; exit 2 ;;
esac
