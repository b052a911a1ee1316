# bash completion for luaretry: commands, options, and policy names from
# `luaretry list --names` (the same search path POLICY is looked up in), and
# the names --set takes from `luaretry list --set-names` (the schema's own).
# Installed as PREFIX/share/bash-completion/completions/luaretry.

_luaretry_run_options="-X --request -H --header -d --data --data-ascii --data-binary --data-raw
  -o --output -L --location --max-redirs --location-trusted -u --user -A --user-agent
  --compressed -k --insecure --cacert -E --cert --key -i --include -D --dump-header
  -w --write-out -f --fail -I --head -m --max-time --retry-max-time --connect-timeout
  -s --silent -S --show-error -q --quiet -v --verbose --seed --set --stats --stats=json
  --log-json --metrics-file --urls --parallel --output-dir --fleet --redis --help
  --no-progress-meter -# --progress-bar -J --remote-header-name -N --no-buffer -e --referer
  -g --globoff
  -4 --ipv4 -6 --ipv6 --http1.1 --http2 --tlsv1.2 --tlsv1.3 --limit-rate --max-filesize
  --fail-early --retry --retry-delay --retry-all-errors --retry-connrefused
  --retry-on-exit --final-on-exit --retry-if-output --final-if-output --before-retry
  --exit-status
  --stdout=live --stdout=final --trace-ascii --create-dirs --fail-with-body
  -O --remote-name --remote-name-all --url -T --upload-file -F --form --form-string -G --get
  -b --cookie -c --cookie-jar --resolve -x --proxy -K --config -Z --parallel-max
  -Y --speed-limit -y --speed-time -C --continue-at --checksum"

_luaretry() {
  local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
  local commands="run check simulate list fleet faults demo help"
  COMPREPLY=()
  if [[ $COMP_CWORD -eq 1 ]]; then
    COMPREPLY=($(compgen -W "$commands --help --version" -- "$cur"))
    return
  fi
  local cmd=${COMP_WORDS[1]}
  case $prev in
    -o|--output|-D|--dump-header|--cacert|-E|--cert|--key|--log-json|--metrics-file|--urls|--svg|\
    --trace-ascii|-T|--upload-file|-b|--cookie|-c|--cookie-jar|-K|--config)
      COMPREPLY=($(compgen -f -- "$cur")); return ;;
    -C|--continue-at) COMPREPLY=($(compgen -W "-" -- "$cur")); return ;;
    --checksum)
      # ALG=HEX: the algorithm, then the user's own digest (as zsh's)
      COMPREPLY=($(compgen -W "sha-256= sha-512= md5=" -- "$cur"))
      [[ ${#COMPREPLY[@]} -gt 0 ]] && compopt -o nospace 2>/dev/null
      return ;;
    --fleet) COMPREPLY=($(compgen -W "local" -- "$cur")); [[ $cmd != simulate ]] && return ;;
    --output-dir) COMPREPLY=($(compgen -d -- "$cur")); return ;;
    --set)
      COMPREPLY=($(compgen -W "$("${COMP_WORDS[0]}" list --set-names 2>/dev/null)" -- "$cur"))
      [[ ${#COMPREPLY[@]} -gt 0 ]] && compopt -o nospace 2>/dev/null
      return ;;
    --exit-status) COMPREPLY=($(compgen -W "command luaretry" -- "$cur")); return ;;
    -X|--request) COMPREPLY=($(compgen -W "GET HEAD POST PUT DELETE PATCH OPTIONS" -- "$cur")); return ;;
    -H|--header|-d|--data|--data-ascii|--data-binary|--data-raw|-u|--user|-A|--user-agent|\
    -w|--write-out|-m|--max-time|--retry-max-time|--connect-timeout|--max-redirs|--seed|\
    -e|--referer|--limit-rate|--max-filesize|--retry|--retry-delay|--retry-on-exit|--final-on-exit|\
    --retry-if-output|--final-if-output|--before-retry|\
    --attempts|--clients|--outage|--listen|--probe|--redis|--latency|--calls|--status|--wave|\
    -F|--form|--form-string|--resolve|--url|-x|--proxy|--parallel-max|-Y|--speed-limit|-y|\
    --speed-time) return ;;
  esac
  if [[ $cmd == help ]]; then
    [[ $COMP_CWORD -eq 2 ]] && COMPREPLY=($(compgen -W "$commands" -- "$cur"))
    return
  fi
  if [[ $cur == -* ]]; then
    local opts
    case $cmd in
      run) opts=$_luaretry_run_options ;;
      check) opts="--set --probe --help" ;;
      simulate) opts="--attempts --seed --json --set --probe --clients --outage --status --svg --fleet --wave --process --latency --calls --help" ;;
      list) opts="--names --set-names --help" ;;
      fleet) opts="--fleet --redis --reset --set --help" ;;
      faults) opts="--listen --listen-any --help" ;;
    esac
    COMPREPLY=($(compgen -W "$opts" -- "$cur"))
    return
  fi
  # POLICY: the word after run, simulate or fleet, every word after check
  local i words_before=0
  for ((i = 2; i < COMP_CWORD; i++)); do
    case ${COMP_WORDS[i]} in
      -X|--request|-H|--header|-d|--data|--data-ascii|--data-binary|--data-raw|-o|--output|\
      -u|--user|-A|--user-agent|--cacert|-E|--cert|--key|-D|--dump-header|-w|--write-out|\
      -m|--max-time|--retry-max-time|--connect-timeout|--max-redirs|--seed|--set|--log-json|\
      --metrics-file|--urls|--output-dir|--attempts|--clients|--outage|--svg|--probe|\
      --trace-ascii|--redis|--listen|--latency|--calls|--status|--wave|\
      -T|--upload-file|-F|--form|--form-string|-b|--cookie|-c|--cookie-jar|--resolve|--url|-x|\
      --proxy|-K|--config|--parallel-max|-Y|--speed-limit|-y|--speed-time|-C|--continue-at|--checksum|\
      -e|--referer|--limit-rate|--max-filesize|--retry|--retry-delay|--retry-on-exit|--final-on-exit|\
      --retry-if-output|--final-if-output|--before-retry|--exit-status) ((i++)) ;;
      --fleet) [[ ${COMP_WORDS[i + 1]} == local ]] && ((i++)) ;;
      -*) ;;
      *) ((words_before++)) ;;
    esac
  done
  if [[ $cmd == check || ( $cmd =~ ^(run|simulate|fleet)$ && $words_before -eq 0 ) ]]; then
    COMPREPLY=($(compgen -W "$("${COMP_WORDS[0]}" list --names 2>/dev/null)" -- "$cur")
               $(compgen -f -- "$cur"))
  elif [[ $cmd == faults ]]; then
    COMPREPLY=($(compgen -f -- "$cur"))
  fi
}
complete -F _luaretry luaretry
