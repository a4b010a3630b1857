"""Autoload hook of disastir-mteb, run from ``disastir_mteb.pth`` at every interpreter start.

It must stay tiny: it imports nothing beyond ``os`` and ``sys`` (both already loaded), and it
never imports mteb, torch or the plugin itself at start. It puts a one-shot finder on
``sys.meta_path`` that waits for someone to import ``mteb``; right after mteb's ``__init__`` has
run, it registers the DisastIR tasks (``disastir_mteb.register``, :mod:`disastir_mteb.registration`).
Any failure there becomes a warning: mteb keeps working without the DisastIR tasks.
``DISASTIR_MTEB_AUTOLOAD=0`` turns the hook off (then ``import disastir_mteb`` registers).
"""

import os
import sys

_OFF = ("0", "false", "no", "off")


class _AfterMtebImport:
    """Meta-path finder that wraps the loader of the top-level ``mteb`` package.

    It stays in place until mteb has actually been executed: ``python -m mteb`` asks for the
    spec once (runpy) and then imports the package through a second lookup. ``import disastir_mteb``
    looks for :attr:`registers_disastir_mteb` to know that the hook will register, so it need not.
    """

    registers_disastir_mteb = True

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "mteb":
            return None
        for finder in sys.meta_path:
            if isinstance(finder, _AfterMtebImport):
                continue
            find_spec = getattr(finder, "find_spec", None)
            if find_spec is None:
                continue
            spec = find_spec(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        exec_module = getattr(loader, "exec_module", None)
        if exec_module is None:
            return spec

        def exec_then_register(module):
            exec_module(module)
            _remove()
            _register()

        try:
            loader.exec_module = exec_then_register
        except (AttributeError, TypeError):
            return spec
        return spec


def _remove():
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _AfterMtebImport)]


def _register():
    try:
        import disastir_mteb

        disastir_mteb.register()  # also when the package was imported before mteb (then its import ran no register)
    except Exception as error:
        import warnings

        warnings.warn(
            f"disastir-mteb could not register the DisastIR tasks with mteb ({type(error).__name__}: {error}); "
            "mteb works without them. Set DISASTIR_MTEB_AUTOLOAD=0 to silence this.",
            RuntimeWarning,
            stacklevel=2,
        )


def install():
    """Arm the hook at interpreter start (register at once if mteb is already imported), unless turned off."""
    if os.environ.get("DISASTIR_MTEB_AUTOLOAD", "1").strip().lower() in _OFF:
        return
    if "mteb" in sys.modules:
        _register()
    elif not any(isinstance(f, _AfterMtebImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterMtebImport())


install()
