"""Running on the pod: Ansible through ansible-runner, what a run converged, commands on nodes, the records podctl keeps."""
