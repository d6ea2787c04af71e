# What type checkers and editors see of `import nmt`: the module's own names, and nmt.api's that
# its __getattr__ imports on first use.
from nmt.api import Model as Model
from nmt.api import View as View
from nmt.api import compare as compare
from nmt.api import compare_attentions as compare_attentions
from nmt.api import init as init
from nmt.api import load as load
from nmt.api import prepare as prepare
from nmt.api import timeline as timeline
from nmt.api import train as train

__version__: str
DISTRIBUTION: str
API: tuple[str, ...]
__all__: list[str]

def install_hint(extra: str, packages: str) -> str: ...
