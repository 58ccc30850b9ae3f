# The compose topologies' application image: node 20 with iptables installed once, at build
# time (the capture in the pod's namespace needs it), instead of from the network on every start.
FROM node:20-bookworm-slim
RUN apt-get update -qq \
 && apt-get install -y -qq --no-install-recommends iptables >/dev/null \
 && rm -rf /var/lib/apt/lists/*
