#!/bin/sh
# Every alert has a runbook (issue 23): each alert of
# deploy/monitoring/prometheusrule.yaml carries runbook_url, all with one
# base, ending in #<the alert's name, lower case>, an anchor docs/runbook.md
# has (a "## AlertName" heading); and every section of the runbook is an
# alert's. A broken copy of each side must fail.
. "$(dirname "$0")/lib.sh"
FAIL_PREFIX=runbook- BAD_LINES=12
PY=
for p in python3 /usr/bin/python3; do
	"$p" -c "import yaml" 2>/dev/null && PY=$p && break
done
if [ -z "$PY" ]; then
	skip "runbook: no python3 with PyYAML (Debian package python3-yaml; tests/deps.sh installs it)"
	finish
fi
# check RULES RUNBOOK: "ok ..." / "FAIL ..." lines
check() {
	"$PY" - "$1" "$2" <<'PYEOF'
import re, sys, yaml
rules, book = sys.argv[1], sys.argv[2]
alerts = []
for d in yaml.safe_load_all(open(rules)):
    if d and d.get("kind") == "PrometheusRule":
        for g in d["spec"]["groups"]:
            alerts += [r for r in g["rules"] if "alert" in r]
# GitHub's anchors for "## Name" headings: lower case, spaces to dashes
heads = [h.strip() for h in re.findall(r"^## (.+)$", open(book).read(), re.M)]
anchors = {re.sub(r"[^a-z0-9 _-]", "", h.lower()).replace(" ", "-"): h for h in heads}
bases = set()
for r in alerts:
    url = (r.get("annotations") or {}).get("runbook_url", "")
    base, _, anchor = url.partition("#")
    if not url:
        print(f"FAIL {r['alert']}: no runbook_url")
    elif not base.endswith("/docs/runbook.md"):
        print(f"FAIL {r['alert']}: runbook_url {url} is not docs/runbook.md")
    elif anchor != r["alert"].lower():
        print(f"FAIL {r['alert']}: runbook_url's anchor #{anchor} is not #{r['alert'].lower()}")
    elif anchor not in anchors:
        print(f"FAIL {r['alert']}: {book} has no section '## {r['alert']}'")
    else:
        print(f"ok {r['alert']}")
    bases.add(base)
if len(bases) > 1:
    print(f"FAIL the runbook_urls have {len(bases)} bases: {sorted(bases)}")
names = {r["alert"] for r in alerts}
for h in heads:
    print(f"ok section {h}" if h in names else f"FAIL {book}: section '## {h}' is no alert's")
if not alerts:
    print("FAIL no alerts found")
PYEOF
}
check deploy/monitoring/prometheusrule.yaml docs/runbook.md >"$TMP/out" 2>&1
ok_lines "$TMP/out"
[ "$(grep -c '^ok ' "$TMP/out")" -ge 2 ] || bad "the check printed too little" "$TMP/out"
# broken copies: an alert without runbook_url, one pointing elsewhere, a
# section gone
sed '0,/runbook_url:/{/runbook_url:/d}' deploy/monitoring/prometheusrule.yaml >"$TMP/r1.yaml"
sed '0,/runbook_url:/{s/#gpuguard\([a-z]*\)/#gpuguard\1x/}' deploy/monitoring/prometheusrule.yaml >"$TMP/r2.yaml"
sed '0,/^## /{s/^## .*/## Renamed/}' docs/runbook.md >"$TMP/book.md"
for c in "$TMP/r1.yaml docs/runbook.md" "$TMP/r2.yaml docs/runbook.md" "deploy/monitoring/prometheusrule.yaml $TMP/book.md"; do
	# shellcheck disable=SC2086 # two words
	check $c >"$TMP/out" 2>&1
	grep -q '^FAIL ' "$TMP/out" && ok || bad "a broken copy passed: $c"
done
finish
