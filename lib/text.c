/*
 * text.c - the appender of text.h: snprintf over the room left in the
 * caller's buffer, and a count of the rest once the buffer is full.
 *
 * No state and no locks (text.h).
 */
#include <stdarg.h>
#include <stdio.h>

#include "lib/text.h"

/* Contract in text.h. */
struct text text_start(char *buf, size_t cap)
{
	struct text t = { buf, cap, 0 };

	if (cap > 0)
		buf[0] = '\0';
	return t;
}

/* Contract in text.h. */
void text_put(struct text *t, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	if (t->len < t->cap)
		n = vsnprintf(t->buf + t->len, t->cap - t->len, fmt, ap);
	else
		n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n > 0)
		t->len += (size_t)n;
}
