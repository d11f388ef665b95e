"""``python -m icore`` runs the CLI (:func:`icore._entry.main`)."""

from icore._entry import main

main()
