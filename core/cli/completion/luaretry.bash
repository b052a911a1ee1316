# bash completion for luaretry: commands, options, and policy names from
# `luaretry list --names` (the same search path POLICY is looked up in).
# Installed as PREFIX/share/bash-completion/completions/luaretry.

_luaretry_run_options="-X --request -H --header -d --data --data-ascii --data-binary --data-raw
  -o --output -L --location --max-redirs --location-trusted -u --user -A --user-agent
  --compressed -k --insecure --cacert -E --cert --key -i --include -D --dump-header
  -w --write-out -f --fail -I --head -m --max-time --retry-max-time --connect-timeout
  -s --silent -S --show-error -q --quiet -v --verbose --seed --set --stats --stats=json
  --log-json --metrics-file --urls --parallel --output-dir --help"

_luaretry() {
  local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
  local commands="run check simulate list faults demo help"
  COMPREPLY=()
  if [[ $COMP_CWORD -eq 1 ]]; then
    COMPREPLY=($(compgen -W "$commands --help --version" -- "$cur"))
    return
  fi
  local cmd=${COMP_WORDS[1]}
  case $prev in
    -o|--output|-D|--dump-header|--cacert|-E|--cert|--key|--log-json|--metrics-file|--urls|--svg)
      COMPREPLY=($(compgen -f -- "$cur")); return ;;
    --output-dir) COMPREPLY=($(compgen -d -- "$cur")); return ;;
    -X|--request) COMPREPLY=($(compgen -W "GET HEAD POST PUT DELETE PATCH OPTIONS" -- "$cur")); return ;;
    -H|--header|-d|--data|--data-ascii|--data-binary|--data-raw|-u|--user|-A|--user-agent|\
    -w|--write-out|-m|--max-time|--retry-max-time|--connect-timeout|--max-redirs|--seed|--set|\
    --parallel|--attempts|--clients|--outage|--status|--listen) return ;;
  esac
  if [[ $cmd == help ]]; then
    [[ $COMP_CWORD -eq 2 ]] && COMPREPLY=($(compgen -W "$commands" -- "$cur"))
    return
  fi
  if [[ $cur == -* ]]; then
    local opts
    case $cmd in
      run) opts=$_luaretry_run_options ;;
      check) opts="--set --help" ;;
      simulate) opts="--attempts --seed --json --set --clients --outage --status --svg --fleet --process --help" ;;
      list) opts="--names --help" ;;
      faults) opts="--listen --help" ;;
    esac
    COMPREPLY=($(compgen -W "$opts" -- "$cur"))
    return
  fi
  # POLICY: the word after run or simulate, every word after check
  local i words_before=0
  for ((i = 2; i < COMP_CWORD; i++)); do
    case ${COMP_WORDS[i]} in
      -X|--request|-H|--header|-d|--data|--data-ascii|--data-binary|--data-raw|-o|--output|\
      -u|--user|-A|--user-agent|--cacert|-E|--cert|--key|-D|--dump-header|-w|--write-out|\
      -m|--max-time|--retry-max-time|--connect-timeout|--max-redirs|--seed|--set|--log-json|\
      --metrics-file|--urls|--parallel|--output-dir|--attempts|--clients|--outage|--status|--svg) ((i++)) ;;
      -*) ;;
      *) ((words_before++)) ;;
    esac
  done
  if [[ $cmd == check || ( $cmd =~ ^(run|simulate)$ && $words_before -eq 0 ) ]]; then
    COMPREPLY=($(compgen -W "$("${COMP_WORDS[0]}" list --names 2>/dev/null)" -- "$cur")
               $(compgen -f -- "$cur"))
  elif [[ $cmd == faults ]]; then
    COMPREPLY=($(compgen -f -- "$cur"))
  fi
}
complete -F _luaretry luaretry
