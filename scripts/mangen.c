/*
 * mangen.c - the man page's build step: copies docs/statefs.8.scd from
 * stdin to stdout with its one "@OPTIONS@" line replaced by the statefs
 * option table in scdoc (layout_help_scdoc), the table --help prints,
 * and each "@SOURCE_RULE@" with LAYOUT_SOURCE_RULE, the words --help
 * uses for the source argument.
 *
 * Exits 1 when the template has no such line or more than one, or when
 * a line of text (outside a ``` block) begins with '.' or '\'': scdoc
 * passes it to roff as is, which takes it for a request and drops it
 * (".stats is ..." would vanish from the page).
 */
#include <stdio.h>
#include <string.h>

#include "layout/layout.h"

int main(void)
{
	char line[4096];
	int found = 0, literal = 0, bad = 0;
	unsigned n = 0;

	while (fgets(line, sizeof(line), stdin)) {
		const char *text = line + strspn(line, "\t");

		n++;
		if (strncmp(text, "```", 3) == 0)
			literal = !literal;
		if (!literal && (*text == '.' || *text == '\'')) {
			fprintf(stderr, "mangen: line %u begins with '%c', which "
				"roff takes for a request: reword it\n", n, *text);
			bad = 1;
		}
		if (strcmp(line, "@OPTIONS@\n") == 0) {
			layout_help_scdoc(stdout);
			found++;
		} else {
			const char *p = line, *at;

			while ((at = strstr(p, "@SOURCE_RULE@"))) {
				fwrite(p, 1, (size_t)(at - p), stdout);
				fputs(LAYOUT_SOURCE_RULE, stdout);
				p = at + strlen("@SOURCE_RULE@");
			}
			fputs(p, stdout);
		}
	}
	if (found != 1) {
		fprintf(stderr, "mangen: the template needs one @OPTIONS@ line, "
			"it has %d\n", found);
		bad = 1;
	}
	return bad || ferror(stdout) || fflush(stdout) != 0;
}
