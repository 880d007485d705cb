"""What every service shares: settings, names, metrics, the rank-table ConfigMap format and the launcher."""
