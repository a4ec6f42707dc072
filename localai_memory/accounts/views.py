"""Log in, log out and sign up pages (session auth for the web app)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib import auth
from django.contrib.auth.forms import AuthenticationForm
from django.contrib.auth.views import LoginView
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from localai_memory.core.errors import ApplicationError

from .services import user_register
from .throttling import too_many_tries, too_many_tries_sentence


def _refused(request: HttpRequest, template: str, context: dict[str, Any], wait: int) -> HttpResponse:
    error = too_many_tries_sentence(wait)
    response = render(request, template, {**context, "error": error}, status=429)
    response["Retry-After"] = str(wait)
    return response


def admin_login(request: HttpRequest, **kwargs: Any) -> HttpResponse:
    """The admin's log-in page, with the same budget of password tries as ``/login/`` (staff accounts are the
    ones most worth guessing)."""
    from django.contrib import admin

    if request.method == "POST":
        wait = too_many_tries(request)
        if wait:
            return _refused(request, "accounts/login.html", {"form": AuthenticationForm(), "next": "/admin/"}, wait)
    return admin.site.login(request, **kwargs)


def admin_password_change(request: HttpRequest, **kwargs: Any) -> HttpResponse:
    """The admin's password change, whose old-password field is a password try like any other: counted in the
    same budget (a stolen staff session must not guess the password faster than the log-in page lets anyone)."""
    from django.contrib import admin

    if request.method == "POST" and request.user.is_active and request.user.is_staff:
        wait = too_many_tries(request)
        if wait:
            response = HttpResponse(too_many_tries_sentence(wait), status=429, content_type="text/plain; charset=utf-8")
            response["Retry-After"] = str(wait)
            return response
    return admin.site.admin_view(admin.site.password_change)(request, **kwargs)  # staff only, as the admin's own


class MemoryLoginView(LoginView):
    template_name = "accounts/login.html"
    redirect_authenticated_user = True

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        wait = too_many_tries(request)
        if wait:  # checked before the password, so a guesser learns nothing more
            return _refused(request, self.template_name, self.get_context_data(form=self.get_form_class()()), wait)
        return super().post(request, *args, **kwargs)

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        context["open_signup"] = settings.OPEN_SIGNUP
        return context


@require_http_methods(["POST"])
def logout_view(request: HttpRequest) -> HttpResponse:
    auth.logout(request)
    return redirect(settings.LOGOUT_REDIRECT_URL)


@require_http_methods(["GET", "POST"])
def register_view(request: HttpRequest) -> HttpResponse:
    if not settings.OPEN_SIGNUP:
        return render(request, "accounts/register.html", {"closed": True}, status=403)
    error = None
    username = ""
    if request.method == "POST":
        wait = too_many_tries(request)
        if wait:
            return _refused(request, "accounts/register.html", {"username": request.POST.get("username", "")}, wait)
        username = request.POST.get("username", "")
        password = request.POST.get("password", "")
        if password != request.POST.get("password2", ""):
            error = "The two passwords differ."
        else:
            try:
                user = user_register(username=username, password=password)
            except ApplicationError as exc:
                error = exc.message
            else:
                auth.login(request, user, backend="django.contrib.auth.backends.ModelBackend")
                return redirect("/")
    return render(request, "accounts/register.html", {"error": error, "username": username},
                  status=400 if error else 200)
