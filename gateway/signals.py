from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver

from gateway import routing
from gateway.models import ModelRoute, RuntimeEndpoint


@receiver(post_save, sender=RuntimeEndpoint)
@receiver(post_save, sender=ModelRoute)
@receiver(post_delete, sender=RuntimeEndpoint)
@receiver(post_delete, sender=ModelRoute)
def routes_changed(**kwargs) -> None:
    """The saving process sees a routing change at once; others within RUNTIME_ROUTES_TTL."""
    routing.clear_cache()
