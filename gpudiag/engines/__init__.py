"""Hand the probe bundle to an engine (Ansible, pdsh, ClusterShell, Slurm) and read back what it collected.

`zipapp` builds the self-contained bundle; `frames`, `clush` and `ansible_json` parse collected output;
`ingest` turns the parsed output into HostResults shaped like a scan's.
"""
