/*
 * wire.c - the ground of the transport: the deadlines every call of
 * redis/conn.c and redis/discover.c is bounded by (CLOCK_MONOTONIC ms),
 * a failure's text on one line, and what a reply says (a command is
 * exchanged on a link: redis/link.c).
 *
 * It owns nothing and takes no lock: each function works on what its
 * caller hands it.  The files of the transport call down to it, never
 * it up to them (redis/wire.h).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "redis/wire.h"

/* Time ------------------------------------------------------------------- */

uint64_t wire_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

uint64_t wire_left_ms(uint64_t deadline)
{
	uint64_t now = wire_now_ms();

	return deadline > now ? deadline - now : 0;
}

/* Messages ------------------------------------------------------------- */

void wire_why(char *why, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, WHY_MAX, fmt, ap);
	va_end(ap);
	for (char *c = why; *c; c++)
		if ((unsigned char)*c < ' ' || *c == 0x7f)
			*c = '?';
}

/* Replies -------------------------------------------------------------- */

bool wire_is_error(const redisReply *rep, const char *code)
{
	size_t n = strlen(code);

	return rep->type == REDIS_REPLY_ERROR && rep->len >= n &&
	       memcmp(rep->str, code, n) == 0 &&
	       (rep->len == n || rep->str[n] == ' ');
}

bool wire_str_is(const redisReply *rep, const char *s)
{
	return (rep->type == REDIS_REPLY_STRING ||
		rep->type == REDIS_REPLY_STATUS) &&
	       rep->len == strlen(s) && memcmp(rep->str, s, rep->len) == 0;
}
