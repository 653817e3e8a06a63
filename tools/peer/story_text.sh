#!/usr/bin/env bash
# Prints N (default 400) simple English sentences in the TinyStories style, picked by a small LCG (exact in awk's
# doubles): the same text on every machine. The text the llama.cpp comparisons (perplexity_vs_llama_cpp.sh,
# llama_quantize_agreement.sh) score.
#   bash tools/peer/story_text.sh [N]
set -euo pipefail
awk -v n="${1:-400}" 'BEGIN {
  split("Lily Tom Ben Sue Max Anna", names, " "); split("dog cat bird bunny frog", animals, " ");
  split("park garden forest house school", places, " "); split("ball toy box kite cake", things, " ");
  split("happy sad excited scared tired", feelings, " "); s = 1;
  for (i = 0; i < n; i++) {
    s = (s * 75 + 74) % 65537; who = names[s % 6 + 1];  s = (s * 75 + 74) % 65537; a = animals[s % 5 + 1];
    s = (s * 75 + 74) % 65537; p = places[s % 5 + 1];  s = (s * 75 + 74) % 65537; t = things[s % 5 + 1];
    s = (s * 75 + 74) % 65537; f = feelings[s % 5 + 1]; s = (s * 75 + 74) % 65537; k = s % 5;
    if (k == 0) line = "Once upon a time, there was a little girl named " who ". She loved to play in the " p ".";
    else if (k == 1) line = "One day, " who " saw a big " a " in the " p ". The " a " was very " f ".";
    else if (k == 2) line = who " wanted to play with the " t ". " who " said, \"Can I have the " t ", please?\"";
    else if (k == 3) line = "The " a " found a " t " and gave it to " who ". They were very " f ".";
    else line = "At the end of the day, " who " went home and told mom about the " a ".";
    printf "%s ", line;
  }
  printf "\n";
}'
