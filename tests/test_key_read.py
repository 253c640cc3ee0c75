"""The key read of every model call (the ORM's)."""

from datetime import timedelta

import pytest
from django.utils import timezone

from core.exceptions import InvalidApiKey
from gateway import services
from gateway.models import ApiKey

pytestmark = pytest.mark.django_db


def test_the_key_read_gives_the_row_as_the_orm_reads_it(make_key):
    made, plain = make_key(allowed_models=["a", "b"], expires_at=timezone.now() + timedelta(days=1))
    read = services.api_key_authenticate(plain)
    expected = ApiKey.objects.get(pk=made.pk)
    assert isinstance(read, ApiKey)
    for field in ApiKey._meta.concrete_fields:
        if field.name != "last_used_at":  # stamped by the read itself
            assert getattr(read, field.attname) == getattr(expected, field.attname), field.name
    assert read.allowed_models == ["a", "b"] and read.scopes == ["agent", "model"]
    assert read.expires_at.tzinfo is not None


def test_the_key_read_refuses_a_prefix_with_no_row(make_key):
    _, plain = make_key()
    ApiKey.objects.all().delete()
    with pytest.raises(InvalidApiKey):
        services.api_key_authenticate(plain)
