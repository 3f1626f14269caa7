# Sourced by .ci/run and scripts/test: `stage NAME` ends the stage running and starts NAME;
# `stage_times` (on exit, passed or not) prints each stage's wall time, so a slow machine shows
# where its minutes went.
STAGE=""
STAGE_START=$SECONDS
STAGE_TIMES=()

stage() {
  stage_end
  STAGE="$1"
  STAGE_START=$SECONDS
  echo "== $1"
}

stage_end() {
  if [ -n "$STAGE" ]; then
    STAGE_TIMES+=("$(printf '%6d s  %s' $((SECONDS - STAGE_START)) "$STAGE")")
    STAGE=""
  fi
}

stage_times() {
  stage_end
  [ "${#STAGE_TIMES[@]}" -gt 0 ] || return 0
  echo "== ${STAGE_TITLE:-time} by stage (wall clock, $SECONDS s in all)"
  printf '%s\n' "${STAGE_TIMES[@]}"
}
