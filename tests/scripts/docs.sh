#!/bin/sh
# gpuguard: the documentation holds together. Every "DESIGN.md §N" and
# "REAL-CUDA.md §N" the tree cites names a section of docs/design.md or
# docs/real-cuda.md; every relative link in README.md and docs/ names a file
# that exists and, with a #fragment, a heading of that file (GitHub's slug);
# every page under docs/ is reachable from README.md; every suite has a row in
# docs/testing.md.
. tests/scripts/lib.sh

# slugs FILE: GitHub's anchor for each heading of FILE, one a line (lower
# case, punctuation but '-' and '_' dropped, spaces to '-'). Fenced code is
# skipped, so a shell comment in a snippet is no heading.
slugs() {
	awk '/^```/ { fence = !fence; next }
	!fence && /^#+ / {
		s = $0; sub(/^#+ /, "", s); s = tolower(s)
		gsub(/[^a-z0-9 _-]/, "", s); gsub(/ /, "-", s); print s
	}' "$1"
}

# Citations from code and scripts: the section number must be a "## N."
# heading of the page the citation names.
for pair in DESIGN.md:docs/design.md REAL-CUDA.md:docs/real-cuda.md; do
	name=${pair%%:*}
	page=${pair#*:}
	if [ ! -f "$page" ]; then
		bad "$page is missing, yet the tree cites $name"
		continue
	fi
	grep -rhoE "$name §[0-9]+" interpose tools tests include examples Makefile 2>/dev/null |
		sed 's/.*§//' | sort -un >"$TMP/cited"
	n=0
	while read -r sec; do
		n=$((n + 1))
		if grep -qE "^## $sec\. " "$page"; then ok; else bad "$name §$sec is cited, but $page has no section $sec"; fi
	done <"$TMP/cited"
	[ "$n" -gt 0 ] || bad "no citation of $name found: the pattern is broken"
done

# Links: [text](target) where target is not a URL. Relative to the page.
for md in README.md docs/*.md; do
	[ -f "$md" ] || continue
	dir=$(dirname "$md")
	awk '/^```/ { fence = !fence; next } !fence' "$md" |
		grep -oE '\]\([^)[:space:]]+\)' | sed 's/^](//; s/)$//' |
		grep -vE '^[a-z]+:' >"$TMP/links" || true
	while read -r link; do
		file=${link%%#*}
		frag=
		case $link in *'#'*) frag=${link#*#} ;; esac
		if [ -z "$file" ]; then target=$md; else target=$dir/$file; fi
		if [ ! -e "$target" ]; then
			bad "$md links to $link: $target does not exist"
			continue
		fi
		if [ -n "$frag" ] && [ -f "$target" ]; then
			if slugs "$target" | grep -qxF "$frag"; then ok; else bad "$md links to $link: $target has no heading #$frag"; fi
		else
			ok
		fi
	done <"$TMP/links"
done

# Reachability: each docs page is linked from README.md, or from a page that
# README.md links (one level is all the tree has).
for page in docs/*.md; do
	[ -f "$page" ] || continue
	base=$(basename "$page")
	if grep -qE "\]\(docs/$base(#[^)]*)?\)" README.md; then
		ok
	elif grep -lE "\]\((\./)?$base(#[^)]*)?\)" docs/*.md | grep -qv "^$page\$"; then
		ok
	else
		bad "$page is linked from neither README.md nor another page of docs/"
	fi
done

# Every suite tests/run.sh runs has its row in docs/testing.md.
for t in tests/unit/test_*.c tests/sim/test_sim.c tests/preload/t_*.c tests/reallib/*.cu tests/scripts/*.sh; do
	[ "$t" = tests/scripts/lib.sh ] && continue
	if grep -qF "\`$t\`" docs/testing.md; then ok; else bad "$t is a suite with no row in docs/testing.md"; fi
done

finish
