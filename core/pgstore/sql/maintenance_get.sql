SELECT queen.maintenance_state()
