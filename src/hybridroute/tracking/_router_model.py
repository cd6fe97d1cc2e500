"""MLflow "models from code" entry point for a logged router (see :mod:`._pyfunc`).

MLflow runs this file when the model loads, instead of unpickling a Python object, so a
logged router carries no pickled code.
"""

import mlflow.models

from hybridroute.tracking._pyfunc import RouterModel

mlflow.models.set_model(RouterModel())
