"""Several cells (``[cells]``, docs/cells.md): the table (:mod:`.config`), the layout and
association (:mod:`.layout`), the run's component that keeps the association and the gains to
every site (:mod:`.component`), and the uplink of cells whose uploads interact (:mod:`.uplink`).
"""
