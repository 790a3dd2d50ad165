# Shell helper for the scripts that compare two revisions (source it; it
# defines one function). Each revision gets its own temporary worktree, so
# the checkout the script runs from is never touched.
#
# worktree_pair PREFIX REV_A REV_B BUILD_FN
#   Makes $work (a fresh /tmp/PREFIX.XXXXXX), checks REV_A out at $work/a
#   and REV_B at $work/b, and runs `BUILD_FN SIDE REV` in each worktree in
#   turn (SIDE is a or b). On exit the worktrees and $work are removed;
#   a function `before_cleanup`, if the caller defines one, runs first.
worktree_pair() {
  local prefix="$1" rev_a="$2" rev_b="$3" build_fn="$4" side rev
  work=$(mktemp -d "/tmp/$prefix.XXXXXX")
  trap _worktree_pair_cleanup EXIT
  for side in a b; do
    rev="$rev_a"
    [[ "$side" == b ]] && rev="$rev_b"
    git worktree add --detach "$work/$side" "$rev" >/dev/null
    # Not `cd && fn`: errexit is off inside a function run from a && list.
    (cd "$work/$side" || exit 1; "$build_fn" "$side" "$rev")
  done
}

_worktree_pair_cleanup() {
  if declare -F before_cleanup >/dev/null; then before_cleanup || true; fi
  git worktree remove --force "$work/a" >/dev/null 2>&1 || true
  git worktree remove --force "$work/b" >/dev/null 2>&1 || true
  rm -rf "$work"
}
