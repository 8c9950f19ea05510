"""The environment a job trains in and the machine cfgopt runs on, read from files, never by importing the packages:
the environment the project states for the job (`stated`: `Environment`, what the rules and the planner ask), the
repository's dependency pins (`pins`: the releases that judge a config), this machine's GPUs from /proc and /sys
(`gpus`: the target when none is stated), and the node's installed stack (`node`: what `cfgopt doctor` checks).
`cfgopt.knowledge` keeps the facts they are judged against."""
