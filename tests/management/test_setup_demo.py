"""``manage.py setup_demo``: the local admin beside the demo login, made once and never reset."""

import re
from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client

from project.demo_tools.management.commands.setup_demo import ADMIN_USERNAME, DEMO_USERNAME

pytestmark = pytest.mark.django_db

ADMIN_LINE = re.compile(r"Admin login: username 'admin', password '([^']+)'")


def setup_demo() -> str:
    out = StringIO()
    call_command("setup_demo", stdout=out)
    return out.getvalue()


def test_the_first_run_prints_both_logins_and_the_printed_admin_one_opens_the_admin():
    out = setup_demo()
    assert "Demo login: username 'demo', password 'demo-password'" in out
    (password,) = ADMIN_LINE.findall(out)
    assert len(password) >= 16
    admin = get_user_model().objects.get(username=ADMIN_USERNAME)
    assert admin.is_superuser and admin.is_staff
    client = Client()
    assert client.login(username=ADMIN_USERNAME, password=password)
    page = client.get("/admin/")
    assert page.status_code == 200 and b"LLM conversations" in page.content


def test_the_demo_user_stays_out_of_the_admin():
    setup_demo()
    demo = get_user_model().objects.get(username=DEMO_USERNAME)
    assert not demo.is_staff and not demo.is_superuser
    client = Client()
    assert client.login(username=DEMO_USERNAME, password="demo-password")
    assert client.get("/admin/").status_code == 302  # to the admin's login page


def test_a_second_run_neither_reprints_nor_resets_the_admin_password():
    (password,) = ADMIN_LINE.findall(setup_demo())
    again = setup_demo()
    assert password not in again and not ADMIN_LINE.search(again)
    assert "Admin login: username 'admin' (it already existed" in again
    assert "manage.py changepassword admin" in again
    assert get_user_model().objects.get(username=ADMIN_USERNAME).check_password(password)


def test_each_new_admin_gets_its_own_password():
    (first,) = ADMIN_LINE.findall(setup_demo())
    get_user_model().objects.filter(username=ADMIN_USERNAME).delete()
    (second,) = ADMIN_LINE.findall(setup_demo())
    assert first != second


def test_an_existing_user_named_admin_who_is_not_a_superuser_is_left_alone():
    existing = get_user_model().objects.create_user(username=ADMIN_USERNAME, password="mine")
    out = setup_demo()
    assert not ADMIN_LINE.search(out)
    assert "a user 'admin' already exists and is not a superuser" in out
    existing.refresh_from_db()
    assert not existing.is_superuser and not existing.is_staff
    assert existing.check_password("mine")
