"""Serve the lab: `streamlit run app.py`, minus Streamlit's pages/-folder fallback on a cold start.

app.py declares every page with st.navigation. Streamlit still treats a folder named pages/ beside the
entry script as an old-style multipage app until the first run of app.py calls st.navigation, so on a
freshly started server a shared link such as /masks ran pages/masks.py alone: no sidebar model picker,
no wide layout, a file-name menu. Clearing that flag before the server starts closes the window.

    python -m ui.serve [streamlit run options...]     (what `make run` and the browser tests use)
"""
import sys
from pathlib import Path

from streamlit.runtime.pages_manager import PagesManager
from streamlit.web import cli

APP = Path(__file__).resolve().parent.parent / "app.py"


def main(args: list[str]) -> None:
    PagesManager.uses_pages_directory = False  # app.py uses st.navigation; never the pages/ folder
    sys.argv = ["streamlit", "run", str(APP), *args]
    cli.main(prog_name="streamlit")


if __name__ == "__main__":
    main(sys.argv[1:])
