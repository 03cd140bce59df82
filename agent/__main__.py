"""``python -m edgeprof``: the same CLI as the ``edgeprof`` script."""

from edgeprof.cli import main

if __name__ == "__main__":
    main()
