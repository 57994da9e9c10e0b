import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")
application = get_wsgi_application()

# A web server that cannot sign must not start: ImproperlyConfigured says what is wrong,
# and gunicorn, whose workers then fail to boot, exits.
from plans.keys import require_usable_encryption_key  # noqa: E402  (needs the apps loaded)

require_usable_encryption_key()
