/*
 * text.h - an snprintf-style appender: a text built piece by piece into
 * a caller's buffer, that counts what the whole text needs even where
 * the buffer is too small.
 *
 * The text of .stats (layout/layout.c) and the shared store's address
 * as messages name it (redis/options.c) are written with it; each
 * returns, as snprintf does, the length of the whole text, so a caller
 * can ask with no buffer first and then with room for all of it.
 *
 * No state and no locks: a struct text lives on its caller's stack and
 * is used by one thread.  lib/ sits below every layer (store/, layout/,
 * redis/, fs/) and includes none of them.
 */
#ifndef STATEFS_LIB_TEXT_H
#define STATEFS_LIB_TEXT_H

#include <stddef.h>

/*
 * A text being written: @buf of capacity @cap bytes (NULL when @cap is
 * 0), and @len, the length of all that was put so far, which may pass
 * @cap.  @buf holds the first min(@len, @cap - 1) bytes, NUL-terminated
 * when @cap > 0.
 */
struct text {
	char *buf;
	size_t cap;
	size_t len;
};

/*
 * An empty text over @buf (capacity @cap; @buf may be NULL when @cap is
 * 0): @buf is made the empty string when @cap > 0, so a text nothing is
 * put into still reads as one.
 */
struct text text_start(char *buf, size_t cap);

/*
 * Append printf(3)'s @fmt to @t: as much as fits, always
 * NUL-terminated, and @t->len grows by the whole formatted length.  A
 * piece that does not fit is cut; everything after it is only counted.
 */
void text_put(struct text *t, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#endif /* STATEFS_LIB_TEXT_H */
