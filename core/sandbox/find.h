/* find.h: where the installed data lives (find.c): the helper library
 * (lua/) and the shipped policies (policies/). */
#ifndef LUARETRY_FIND_H
#define LUARETRY_FIND_H

/* $LUARETRY_DATADIR when set and not empty, else the folder the library
 * was built for (make install: PREFIX/share/luaretry; the build tree: its
 * top).  Never NULL. */
const char *lr_datadir(void);

#endif
