/*
 * mangen.c - the man page's build step: copies docs/statefs.8.scd from
 * stdin to stdout with its one "@OPTIONS@" line replaced by the statefs
 * option table in scdoc (layout_help_scdoc), the table --help prints.
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
			fputs(line, stdout);
		}
	}
	if (found != 1) {
		fprintf(stderr, "mangen: the template needs one @OPTIONS@ line, "
			"it has %d\n", found);
		bad = 1;
	}
	return bad || ferror(stdout) || fflush(stdout) != 0;
}
