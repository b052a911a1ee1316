/* output.h: what a command prints on standard output (output.c). */
#ifndef LUARETRY_CLI_OUTPUT_H
#define LUARETRY_CLI_OUTPUT_H

/* Flushes standard output, keeping the first failure; 0, or -1. */
int cli_out_flush(void);
/* At the command's end (main.c): flushes standard output; a write of it
 * that failed is said ("luaretry: standard output: writing: WHY") and
 * turns `status` EXIT_OK into EXIT_FINAL (a worse status stays). */
int cli_out_done(int status);

#endif
