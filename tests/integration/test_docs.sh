#!/usr/bin/env bash
# The documentation a user reads: README.md stays a short page for users (at
# most 300 lines; the reference is in docs/), every relative link in README.md
# and docs/ leads to a file a clone has (and to a heading there, for #anchors),
# and no page tells the project's history ("session 4", "(was 115 us)"): they
# say what is. tests/integration/docs_check.py does the reading.
source "$(dirname "$0")/lib.sh"
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
checker=$here/docs_check.py

n=$(wc -l <"$root/README.md")
check "README.md has at most 300 lines ($n)" test "$n" -le 300

for what in links history; do
	out=$(python3 "$checker" "$what" "$root")
	rc=$?
	[ -n "$out" ] && sed 's/^/# /' <<<"$out"
	case $what in
	links) check "every relative link in README.md and docs/ resolves" test "$rc" -eq 0 ;;
	history) check "no line in README.md or docs/ tells history" test "$rc" -eq 0 ;;
	esac
done

# the checker must catch what it is for, and leave ordinary words alone
bad=$TEST_TMP/bad
mkdir -p "$bad/docs"
cat >"$bad/README.md" <<'EOF'
# Title
See [a page](docs/page.md), [gone](docs/gone.md), [a heading](docs/page.md#no-such-heading)
and [one that is](docs/page.md#the-agent-run).
Measured in session 4: 74 us (was 115 us).
It was 7,134 on the same measure before the rewrite.
An on-demand session was refused before the agent started; `session 3` in code is code.
EOF
printf '# Page\n## The `agent` run\n[back](../README.md#title)\n' >"$bad/docs/page.md"
links=$(python3 "$checker" links "$bad")
check "the checker names a missing file" grep -q 'README.md:2: docs/gone.md: no such file' <<<"$links"
check "the checker names a missing heading" grep -q 'README.md:2: docs/page.md#no-such-heading: no heading' <<<"$links"
check "the checker takes a heading with code in it, and ../ links" \
	test "$(wc -l <<<"$links")" -eq 2
hist=$(python3 "$checker" history "$bad")
check "the checker names 'session N'" grep -q 'README.md:4: .*"session 4"' <<<"$hist"
check "the checker names '(was X)'" grep -q 'README.md:4: .*"(was 115 us' <<<"$hist"
check "the checker names 'was X ... before'" grep -q 'README.md:5: .*was 7,134' <<<"$hist"
if grep -q 'README.md:6:' <<<"$hist"; then
	not_ok "the checker leaves 'an on-demand session was refused before' alone"
else
	ok "the checker leaves 'an on-demand session was refused before' alone"
fi
finish
