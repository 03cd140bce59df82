"""The unattended agent: the spool-folder daemon, its status, and the systemd units."""
