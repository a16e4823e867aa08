/*
 * parse.c - the numbers and durations statefs reads from text: a whole
 * number (layout_parse_u64) and seconds with up to three decimals, in
 * milliseconds (layout_parse_seconds).
 *
 * Pure functions, no state and no locks.  The table-driven options and
 * the control-file values of layout.c and the shared store's options of
 * store_options.c all parse here, so a number means the same everywhere
 * and every duration is bounded by STORE_DURATION_MAX_MS, the one bound
 * that keeps now + duration from wrapping (store.h).  Nothing here calls
 * the rest of layout/: the other files call down to it.
 */
#include <errno.h>
#include <stdint.h>

#include "layout/layout.h"

/*
 * Consume decimal digits at *@p into @v.  Returns how many, or -1 on
 * overflow.
 */
static int take_digits(const char **p, uint64_t *v)
{
	int n = 0;

	*v = 0;
	for (; **p >= '0' && **p <= '9'; (*p)++, n++) {
		unsigned d = (unsigned)(**p - '0');

		if (*v > (UINT64_MAX - d) / 10)
			return -1;
		*v = *v * 10 + d;
	}
	return n;
}

/* Contract in layout.h. */
int layout_parse_u64(const char *s, uint64_t *out)
{
	uint64_t v;

	if (take_digits(&s, &v) <= 0 || *s != '\0')
		return -EINVAL;
	*out = v;
	return 0;
}

/* Contract in layout.h. */
int layout_parse_seconds(const char *s, uint64_t *ms)
{
	uint64_t sec, frac = 0;
	int nfrac = 0;

	if (take_digits(&s, &sec) <= 0)
		return -EINVAL;
	if (*s == '.') {
		s++;
		nfrac = take_digits(&s, &frac);
		/* Finer than a millisecond is refused, not rounded: the
		 * caller would silently get a different deadline. */
		if (nfrac < 1 || nfrac > 3)
			return -EINVAL;
	}
	if (*s != '\0')
		return -EINVAL;
	for (int i = nfrac; i < 3; i++)
		frac *= 10;
	/* Every duration ends up in a deadline, now + duration: the one
	 * bound that keeps it from wrapping (store.h). */
	if (sec > STORE_DURATION_MAX_MS / 1000 ||
	    sec * 1000 + frac > STORE_DURATION_MAX_MS)
		return -EINVAL;
	*ms = sec * 1000 + frac;
	return 0;
}
